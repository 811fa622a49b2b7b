package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ensureImageVolumes pulls, per their pullPolicy, the images of the image
// volumes container c mounts, the way EnsureImage pulls c's own image:
// same events, same errors (ErrImagePull, ImagePullBackOff, ...), same
// per-image back-off. retryAfter is the back-off left after a failed pull;
// pulling is the time the pulls took.
func (m *Manager) ensureImageVolumes(ctx context.Context, pod *v1.Pod, c *v1.Container, sandboxConfig *runtimeapi.PodSandboxConfig) (retryAfter, pulling time.Duration, err error) {
	for _, vm := range c.VolumeMounts {
		vol := podVolume(pod, vm.Name)
		if vol == nil || vol.Image == nil {
			continue
		}
		// The volume's image as a container of its own: EnsureImage's
		// events then name the image, and its back-off is the image's.
		puller := &v1.Container{Name: c.Name, Image: vol.Image.Reference, ImagePullPolicy: vol.Image.PullPolicy}
		r, err := m.EnsureImage(ctx, pod, puller, sandboxConfig)
		pulling += r.Pulling
		if err != nil {
			if se, ok := errors.AsType[*SyncError](err); ok {
				return r.RetryAfter, pulling, &SyncError{Reason: se.Reason, Message: fmt.Sprintf("image volume %q: %s", vm.Name, se.Message), Err: se.Err}
			}
			return r.RetryAfter, pulling, fmt.Errorf("image volume %q: %w", vm.Name, err)
		}
	}
	return 0, pulling, nil
}

// podVolume is the pod's volume of that name, or nil.
func podVolume(pod *v1.Pod, name string) *v1.Volume {
	i := slices.IndexFunc(pod.Spec.Volumes, func(v v1.Volume) bool { return v.Name == name })
	if i < 0 {
		return nil
	}
	return &pod.Spec.Volumes[i]
}
