package criconfig

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/podenv"
	"github.com/berth-agent/berth/internal/podpath"
	"github.com/berth-agent/berth/internal/podresources"
)

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
		hosts, err := b.ensureHostsFile(pod, podIPs)
		if err != nil {
			return nil, err
		}
		if hosts != "" {
			mounts = append(mounts, &runtimeapi.Mount{ContainerPath: etcHostsPath, HostPath: hosts})
		}
	}
	if p := c.TerminationMessagePath; p != "" && !mounted[filepath.Clean(p)] {
		file, err := b.newTerminationMessageFile(pod, c.Name)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: p, HostPath: file, SelinuxRelabel: true})
	}
	return mounts, nil
}

// volumeMount resolves one volumeMount, the index-th of the container's, to
// a host path and its options. With a subPath the host path is a bind
// mount of it that berth made (see subpath.go).
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
	hostPath, relabel, err := b.volumeHostPath(pod, vol)
	if err != nil {
		return nil, err
	}
	if subPath != "" {
		hostPath, err = b.prepareSubPath(pod.UID, vol.Name, container, index, hostPath, subPath)
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

// volumeHostPath prepares a pod volume and returns its path on the host and
// whether the runtime may relabel it for SELinux (berth's own directories
// only, never a host path the operator named).
func (b *Builder) volumeHostPath(pod *v1.Pod, vol *v1.Volume) (string, bool, error) {
	switch {
	case vol.HostPath != nil:
		return vol.HostPath.Path, false, checkHostPath(vol.Name, vol.HostPath)
	case vol.EmptyDir != nil:
		dir, err := b.ensureEmptyDir(pod, vol.Name, vol.EmptyDir)
		return dir, true, err
	case vol.ConfigMap != nil, vol.Secret != nil:
		dir, err := b.ensureObjectVolume(pod, vol)
		return dir, true, err
	}
	return "", false, fmt.Errorf("volume %q: only hostPath, emptyDir, configMap, secret and image volumes are supported (berth has no API server for projected volumes)", vol.Name)
}

// checkHostPath applies the kubelet's hostPath type checks, creating the
// directory or file for the *OrCreate types.
func checkHostPath(volume string, hp *v1.HostPathVolumeSource) error {
	typ := v1.HostPathUnset
	if hp.Type != nil {
		typ = *hp.Type
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("hostPath %q for volume %q: %s", hp.Path, volume, fmt.Sprintf(format, args...))
	}
	if typ == v1.HostPathUnset {
		return nil
	}
	fi, err := os.Stat(hp.Path)
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return fail("%v", err)
	}
	switch typ {
	case v1.HostPathDirectoryOrCreate:
		if missing {
			if err := os.MkdirAll(hp.Path, 0o755); err != nil {
				return fail("create directory: %v", err)
			}
			return nil
		}
		if !fi.IsDir() {
			return fail("not a directory")
		}
	case v1.HostPathDirectory:
		if missing {
			return fail("does not exist (type Directory needs an existing directory; DirectoryOrCreate creates it)")
		}
		if !fi.IsDir() {
			return fail("not a directory")
		}
	case v1.HostPathFileOrCreate:
		if missing {
			f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return fail("create file (its parent directory must exist): %v", err)
			}
			return f.Close()
		}
		if !fi.Mode().IsRegular() {
			return fail("not a file")
		}
	case v1.HostPathFile:
		if missing {
			return fail("does not exist (type File needs an existing file; FileOrCreate creates it)")
		}
		if !fi.Mode().IsRegular() {
			return fail("not a file")
		}
	case v1.HostPathSocket, v1.HostPathCharDev, v1.HostPathBlockDev:
		want := map[v1.HostPathType]struct {
			mode fs.FileMode
			word string
		}{
			v1.HostPathSocket:   {fs.ModeSocket, "a socket"},
			v1.HostPathCharDev:  {fs.ModeCharDevice, "a character device"},
			v1.HostPathBlockDev: {fs.ModeDevice, "a block device"},
		}[typ]
		if missing {
			return fail("does not exist (type %s needs %s)", typ, want.word)
		}
		mode := fi.Mode().Type()
		if typ == v1.HostPathBlockDev && mode&fs.ModeCharDevice != 0 {
			return fail("not %s", want.word)
		}
		if mode&want.mode == 0 {
			return fail("not %s", want.word)
		}
	default:
		return fail("unknown hostPath type %q", typ)
	}
	return nil
}

// ensureEmptyDir creates the emptyDir volume's directory, world-writable like
// the kubelet's so containers running as any user can use it, mounts a tmpfs
// on it for medium Memory (see memoryVolumeSize), and hands it to the pod's
// fsGroup. It is idempotent: the second container to mount it finds it ready.
func (b *Builder) ensureEmptyDir(pod *v1.Pod, name string, ed *v1.EmptyDirVolumeSource) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("emptyDir volume %q: %w", name, err)
	}
	dir, err := b.emptyDirPath(pod.UID, name)
	if err != nil {
		return fail(err)
	}
	switch ed.Medium {
	case v1.StorageMediumDefault, v1.StorageMediumMemory:
	default:
		return fail(fmt.Errorf("medium %q is not supported (only the default and Memory)", ed.Medium))
	}
	if err := podpath.MkdirAll(b.opts.RootDir, filepath.Dir(dir), 0o750); err != nil {
		return fail(err)
	}
	// The volume's own directory too: a link there would have berth
	// mount, chown and chmod whatever it points at.
	if err := podpath.MkdirAll(b.opts.RootDir, dir, 0o777); err != nil {
		return fail(err)
	}
	if ed.Medium == v1.StorageMediumMemory {
		mounted, err := isMountPoint(dir)
		if err != nil {
			return fail(err)
		}
		if !mounted {
			size, err := b.memoryVolumeSize(pod, ed)
			if err != nil {
				return fail(err)
			}
			opts := fmt.Sprintf("mode=0777,size=%d", size)
			if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
				return fail(fmt.Errorf("mount tmpfs: %w", err))
			}
		}
	}
	mode := os.FileMode(0o777)
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		if err := os.Lchown(dir, -1, int(*sc.FSGroup)); err != nil {
			return fail(fmt.Errorf("give it to fsGroup %d: %w", *sc.FSGroup, err))
		}
		mode |= os.ModeSetgid
	}
	// Mkdir's mode is cut by the umask; the volume must be writable for all.
	if err := os.Chmod(dir, mode); err != nil {
		return fail(err)
	}
	return dir, nil
}

// memoryVolumeSize bounds a memory-backed emptyDir as the kubelet does: by
// the pod's memory limit when every container has one, else by the node's
// memory, and by the volume's sizeLimit when that is smaller. Without a
// bound tmpfs takes half the machine's memory, whatever the pod may use.
func (b *Builder) memoryVolumeSize(pod *v1.Pod, ed *v1.EmptyDirVolumeSource) (int64, error) {
	facts, err := b.nodeFacts()
	if err != nil {
		return 0, err
	}
	size := facts.Allocatable.Memory().Value()
	if lim, ok := podresources.PodRequirements(pod).Limits[v1.ResourceMemory]; ok && !lim.IsZero() {
		size = lim.Value()
	}
	if ed.SizeLimit != nil && !ed.SizeLimit.IsZero() && ed.SizeLimit.Value() < size {
		size = ed.SizeLimit.Value()
	}
	return size, nil
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

// newTerminationMessageFile creates the empty, world-writable file a
// container writes its termination message into. Each container start gets
// a new random name, so a restarted container never sees its predecessor's
// message; the files go with the pod directory.
func (b *Builder) newTerminationMessageFile(pod *v1.Pod, container string) (string, error) {
	dir, err := b.podSubdir(pod.UID, "containers", container)
	if err != nil {
		return "", fmt.Errorf("create termination-message directory: %w", err)
	}
	if err := podpath.MkdirAll(b.opts.RootDir, dir, 0o750); err != nil {
		return "", fmt.Errorf("create termination-message directory: %w", err)
	}
	var name [4]byte
	if _, err := rand.Read(name[:]); err != nil {
		return "", fmt.Errorf("create termination-message file: %w", err)
	}
	path := filepath.Join(dir, hex.EncodeToString(name[:]))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		return "", fmt.Errorf("create termination-message file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("create termination-message file: %w", err)
	}
	// The container may run as any user: open it up past the umask.
	if err := os.Chmod(path, 0o666); err != nil {
		return "", fmt.Errorf("create termination-message file: %w", err)
	}
	return path, nil
}
