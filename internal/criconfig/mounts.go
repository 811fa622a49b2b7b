package criconfig

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/podenv"
)

// etcHostsPath is where a container's /etc/hosts is mounted from.
const etcHostsPath = "/etc/hosts"

// containerMounts is the container's mounts: its volumeMounts in spec order,
// then the managed /etc/hosts and the termination-message file unless the
// container mounts those paths itself. It prepares what the mounts need on
// the host (emptyDir directories and tmpfs, DirectoryOrCreate and
// FileOrCreate hostPaths, the hosts and termination-message files); all of
// it lives under the pod directory or was asked for by the manifest, and is
// idempotent, so a failed start leaves nothing the next attempt trips over.
func (b *Builder) containerMounts(pod *v1.Pod, c *v1.Container, env []podenv.Var, podIPs []string, privileged bool) ([]*runtimeapi.Mount, error) {
	var mounts []*runtimeapi.Mount
	mounted := map[string]bool{}
	for i, vm := range c.VolumeMounts {
		mnt, err := b.volumeMount(pod, c.Name, i, vm, env, privileged)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, mnt)
		mounted[filepath.Clean(vm.MountPath)] = true
	}
	if !mounted[etcHostsPath] {
		hostname, domain, err := b.podHostnameAndDomain(pod)
		if err != nil {
			return nil, err
		}
		hosts, err := b.vols.EnsureHostsFile(pod, podIPs, hostname, domain)
		if err != nil {
			return nil, err
		}
		if hosts != "" {
			mounts = append(mounts, &runtimeapi.Mount{ContainerPath: etcHostsPath, HostPath: hosts})
		}
	}
	if p := c.TerminationMessagePath; p != "" && !mounted[filepath.Clean(p)] {
		file, err := b.vols.NewTerminationMessageFile(pod, c.Name)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: p, HostPath: file, SelinuxRelabel: true})
	}
	return mounts, nil
}

// volumeMount resolves one volumeMount, the index-th of the container's, to
// a host path and its options. With a subPath the host path is a bind
// mount of it that berth made (see package volumes).
func (b *Builder) volumeMount(pod *v1.Pod, container string, index int, vm v1.VolumeMount, env []podenv.Var, privileged bool) (*runtimeapi.Mount, error) {
	i := slices.IndexFunc(pod.Spec.Volumes, func(v v1.Volume) bool { return v.Name == vm.Name })
	if i < 0 {
		return nil, fmt.Errorf("volumeMount %q: no volume of that name in the pod", vm.Name)
	}
	vol := &pod.Spec.Volumes[i]
	subPath := vm.SubPath
	if vm.SubPathExpr != "" {
		var err error
		if subPath, err = podenv.ExpandSubPath(vm.SubPathExpr, env); err != nil {
			return nil, fmt.Errorf("volumeMount %q: %w", vm.Name, err)
		}
	}
	propagation, err := mountPropagation(vm.MountPropagation, privileged)
	if err != nil {
		return nil, fmt.Errorf("volumeMount %q: %w", vm.Name, err)
	}
	if vol.Image != nil {
		return imageVolumeMount(vm, vol.Image, subPath, propagation)
	}
	hostPath, relabel, err := b.vols.VolumePath(pod, vol)
	if err != nil {
		return nil, err
	}
	if subPath != "" {
		hostPath, err = b.vols.PrepareSubPath(pod.UID, vol.Name, container, index, hostPath, subPath)
		if err != nil {
			return nil, fmt.Errorf("container %q volumeMount %q at %s subPath %q: %w", container, vm.Name, vm.MountPath, subPath, err)
		}
	}
	return &runtimeapi.Mount{
		ContainerPath: vm.MountPath,
		HostPath:      hostPath,
		// configMap and secret volumes are read-only whatever the
		// mount says, as the kubelet mounts them.
		Readonly:       vm.ReadOnly || vol.ConfigMap != nil || vol.Secret != nil,
		SelinuxRelabel: relabel,
		Propagation:    propagation,
	}, nil
}

// mountPropagation maps the API's propagation mode to CRI's.
// Bidirectional needs a privileged container, as in the kubelet, because
// mounts it makes leak to the host.
func mountPropagation(p *v1.MountPropagationMode, privileged bool) (runtimeapi.MountPropagation, error) {
	if p == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	}
	switch *p {
	case v1.MountPropagationNone:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	case v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, nil
	case v1.MountPropagationBidirectional:
		if !privileged {
			return 0, errors.New("mountPropagation Bidirectional is only allowed in privileged containers")
		}
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, nil
	}
	return 0, fmt.Errorf("unknown mountPropagation %q", *p)
}
