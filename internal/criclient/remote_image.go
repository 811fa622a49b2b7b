package criclient

import (
	"context"
	"errors"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// remoteImage implements internalapi.ImageManagerService over the generated
// gRPC client, with the same timeout and error rules as remoteRuntime.
type remoteImage struct {
	conn    *criConn
	client  runtimeapi.ImageServiceClient
	timeout time.Duration
}

var _ internalapi.ImageManagerService = (*remoteImage)(nil)

func newRemoteImage(conn *criConn, timeout time.Duration) *remoteImage {
	return &remoteImage{conn: conn, client: runtimeapi.NewImageServiceClient(conn.cc), timeout: timeout}
}

// ListImages lists images matching filter (nil: all).
func (r *remoteImage) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.Images, nil
}

// ImageStatus returns the image, or a response with a nil Image when the
// runtime does not have it (that is not an error in CRI).
func (r *remoteImage) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image, Verbose: verbose})
	if err != nil {
		return nil, err
	}
	if resp.Image != nil && (resp.Image.Id == "" || resp.Image.Size == 0) {
		return nil, errors.New("runtime returned an image status without ID or size")
	}
	return resp, nil
}

// PullImage pulls an image and returns its reference. A pull of a large
// image over a slow link legitimately takes longer than any request timeout,
// so only ctx bounds it, as in the kubelet.
func (r *remoteImage) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	resp, err := r.client.PullImage(ctx, &runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: podSandboxConfig})
	if err != nil {
		return "", err
	}
	if resp.ImageRef == "" {
		return "", errors.New("runtime returned an empty image reference")
	}
	return resp.ImageRef, nil
}

// RemoveImage removes an image; removing an absent image is success in CRI.
func (r *remoteImage) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_, err := r.client.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: image})
	return err
}

// ImageFsInfo reports the image filesystem's usage, for image GC.
func (r *remoteImage) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.client.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
}

// Close shuts the channel down; safe to call more than once.
func (r *remoteImage) Close(context.Context) error {
	return r.conn.close()
}
