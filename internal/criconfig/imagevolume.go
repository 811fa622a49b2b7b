package criconfig

import (
	"fmt"
	"slices"
	"strings"

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
// back from the runtime (gc) and keeps those images while the
// container exists, as it keeps the container's own image.
const AnnotationImageVolumes = "io.berth.image-volumes"

// imageVolumeMount is the CRI mount of an image volume: the image by its
// reference (Options.ResolveImageMounts turns it into the runtime's image ID),
// the subPath inside the image, always read-only.
func imageVolumeMount(vm v1.VolumeMount, iv *v1.ImageVolumeSource, subPath string, propagation runtimeapi.MountPropagation) (*runtimeapi.Mount, error) {
	ref, _, _, err := ApplyDefaultTag(iv.Reference)
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
