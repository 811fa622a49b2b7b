package volumes

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/podpath"
	"github.com/berth-agent/berth/internal/podresources"
)

// VolumePath prepares a pod volume and returns its path on the host and
// whether the runtime may relabel it for SELinux (berth's own directories
// only, never a host path the operator named).
func (h *Host) VolumePath(pod *v1.Pod, vol *v1.Volume) (string, bool, error) {
	switch {
	case vol.HostPath != nil:
		return vol.HostPath.Path, false, checkHostPath(vol.Name, vol.HostPath)
	case vol.EmptyDir != nil:
		dir, err := h.ensureEmptyDir(pod, vol.Name, vol.EmptyDir)
		return dir, true, err
	case vol.ConfigMap != nil, vol.Secret != nil:
		dir, err := h.ensureObjectVolume(pod, vol)
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
func (h *Host) ensureEmptyDir(pod *v1.Pod, name string, ed *v1.EmptyDirVolumeSource) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("emptyDir volume %q: %w", name, err)
	}
	dir, err := h.emptyDirPath(pod.UID, name)
	if err != nil {
		return fail(err)
	}
	switch ed.Medium {
	case v1.StorageMediumDefault, v1.StorageMediumMemory:
	default:
		return fail(fmt.Errorf("medium %q is not supported (only the default and Memory)", ed.Medium))
	}
	if err := podpath.MkdirAll(h.opts.RootDir, filepath.Dir(dir), 0o750); err != nil {
		return fail(err)
	}
	// The volume's own directory too: a link there would have berth
	// mount, chown and chmod whatever it points at.
	if err := podpath.MkdirAll(h.opts.RootDir, dir, 0o777); err != nil {
		return fail(err)
	}
	if ed.Medium == v1.StorageMediumMemory {
		mounted, err := isMountPoint(dir)
		if err != nil {
			return fail(err)
		}
		if !mounted {
			size, err := h.memoryVolumeSize(pod, ed)
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
func (h *Host) memoryVolumeSize(pod *v1.Pod, ed *v1.EmptyDirVolumeSource) (int64, error) {
	facts, err := h.opts.NodeFacts()
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

// NewTerminationMessageFile creates the empty, world-writable file a
// container writes its termination message into. Each container start gets
// a new random name, so a restarted container never sees its predecessor's
// message; the files go with the pod directory.
func (h *Host) NewTerminationMessageFile(pod *v1.Pod, container string) (string, error) {
	dir, err := h.podSubdir(pod.UID, "containers", container)
	if err != nil {
		return "", fmt.Errorf("create termination-message directory: %w", err)
	}
	if err := podpath.MkdirAll(h.opts.RootDir, dir, 0o750); err != nil {
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
