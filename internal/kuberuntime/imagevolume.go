package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Image volumes (KEP-4639, GA in Kubernetes 1.36): a volume whose content
// is an OCI image, pulled like a container's image with the volume's
// pullPolicy and mounted read-only by the runtime (CRI Mount.image;
// containerd >= 2.1, checked by checkRuntimeFeatures before the sandbox
// is made).

// AnnotationImageVolumes lists, comma-separated, the image IDs a
// container mounts as image volumes: image garbage collection reads it
// back from the runtime (cri/gc) and keeps those images while the
// container exists, as it keeps the container's own image.
const AnnotationImageVolumes = "io.berth.image-volumes"

// ensureImageVolumes pulls, per their pullPolicy, the images of the image
// volumes container c mounts, the way EnsureImage pulls c's own image:
// same events, same errors (ErrImagePull, ImagePullBackOff, ...), same
// per-image back-off. retryAfter is the back-off left after a failed pull.
func (m *Manager) ensureImageVolumes(ctx context.Context, pod *v1.Pod, c *v1.Container, sandboxConfig *runtimeapi.PodSandboxConfig) (retryAfter time.Duration, err error) {
	for _, vm := range c.VolumeMounts {
		vol := podVolume(pod, vm.Name)
		if vol == nil || vol.Image == nil {
			continue
		}
		// The volume's image as a container of its own: EnsureImage's
		// events then name the image, and its back-off is the image's.
		puller := &v1.Container{Name: c.Name, Image: vol.Image.Reference, ImagePullPolicy: vol.Image.PullPolicy}
		if _, err := m.EnsureImage(ctx, pod, puller, sandboxConfig); err != nil {
			retry := m.pullRetryAfter(pod, puller, err)
			if se, ok := errors.AsType[*SyncError](err); ok {
				return retry, &SyncError{Reason: se.Reason, Message: fmt.Sprintf("image volume %q: %s", vm.Name, se.Message), Err: se.Err}
			}
			return retry, fmt.Errorf("image volume %q: %w", vm.Name, err)
		}
	}
	return 0, nil
}

// imageVolumeMount is the CRI mount of an image volume: the image by its
// reference (resolveImageMounts turns it into the runtime's image ID),
// the subPath inside the image, always read-only.
func imageVolumeMount(vm v1.VolumeMount, iv *v1.ImageVolumeSource, subPath string, propagation runtimeapi.MountPropagation) (*runtimeapi.Mount, error) {
	ref, _, _, err := applyDefaultTag(iv.Reference)
	if err != nil {
		return nil, fmt.Errorf("image volume %q: %w", vm.Name, err)
	}
	return &runtimeapi.Mount{
		ContainerPath: vm.MountPath,
		Image:         &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: iv.Reference},
		ImageSubPath:  subPath,
		Readonly:      true,
		Propagation:   propagation,
	}, nil
}

// resolveImageMounts replaces each image mount's reference with the
// runtime's ID of the image, as the kubelet passes the pull's image_ref:
// the container then mounts exactly the image that was pulled, even if
// the tag moves meanwhile. ensureImageVolumes pulled them already; one
// gone since (image garbage collection) is an error and the next sync
// pulls it again.
func (m *Manager) resolveImageMounts(ctx context.Context, mounts []*runtimeapi.Mount) error {
	for _, mnt := range mounts {
		if mnt.Image == nil {
			continue
		}
		id, err := m.imageRef(ctx, mnt.Image)
		if err != nil {
			return fmt.Errorf("image volume at %s: inspect image %q: %w", mnt.ContainerPath, mnt.Image.Image, err)
		}
		if id == "" {
			return fmt.Errorf("image volume at %s: image %q is not present", mnt.ContainerPath, mnt.Image.Image)
		}
		mnt.Image = &runtimeapi.ImageSpec{Image: id, UserSpecifiedImage: mnt.Image.UserSpecifiedImage}
	}
	return nil
}

// podVolume is the pod's volume of that name, or nil.
func podVolume(pod *v1.Pod, name string) *v1.Volume {
	i := slices.IndexFunc(pod.Spec.Volumes, func(v v1.Volume) bool { return v.Name == name })
	if i < 0 {
		return nil
	}
	return &pod.Spec.Volumes[i]
}

// imageVolumeIDs is the AnnotationImageVolumes value of a container with
// these (resolved) mounts; "" without image volumes.
func imageVolumeIDs(mounts []*runtimeapi.Mount) string {
	var ids []string
	for _, mnt := range mounts {
		if mnt.Image != nil && !slices.Contains(ids, mnt.Image.Image) {
			ids = append(ids, mnt.Image.Image)
		}
	}
	return strings.Join(ids, ",")
}
