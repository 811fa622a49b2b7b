package volumes

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podpath"
)

// Layout of a pod's directory, RootDir/pods/<uid>, the kubelet's:
//
//	volumes/kubernetes.io~empty-dir/<volume>   emptyDir volumes
//	containers/<container>/<random>            termination-message files
//	etc-hosts                                  the managed /etc/hosts
//	volume-subpaths/<volume>/<container>/<i>   bind mounts of subPaths
const (
	emptyDirPluginDir = "kubernetes.io~empty-dir"
)

// PodDir is the pod's state directory under RootDir. The UID comes from a
// manifest or from a runtime's label: one that is not a single safe path
// element is an error, so the directory can never be outside RootDir/pods.
func (h *Host) PodDir(uid types.UID) (string, error) {
	dir, err := podpath.Within(h.opts.RootDir, "pods", string(uid))
	if err != nil {
		return "", fmt.Errorf("pod directory of uid %q: %w", uid, err)
	}
	return dir, nil
}

// podSubdir is a path inside the pod's state directory, each of elem
// checked to be a single path element (container and volume names come
// from the manifest).
func (h *Host) podSubdir(uid types.UID, elem ...string) (string, error) {
	dir, err := h.PodDir(uid)
	if err != nil {
		return "", err
	}
	p, err := podpath.Within(dir, elem...)
	if err != nil {
		return "", fmt.Errorf("pod directory of uid %q: %w", uid, err)
	}
	return p, nil
}

// emptyDirPath is where an emptyDir volume of the pod lives on the host.
func (h *Host) emptyDirPath(uid types.UID, volume string) (string, error) {
	return h.podSubdir(uid, "volumes", emptyDirPluginDir, volume)
}

// EnsurePodDirs creates the pod's state directory and its log directory
// before its sandbox is created, so the runtime can write container logs
// and berth can lay out volumes. Neither goes through a symbolic link.
func (h *Host) EnsurePodDirs(podDir, logDir string) error {
	if err := podpath.MkdirAll(h.opts.RootDir, podDir, 0o750); err != nil {
		return fmt.Errorf("create the pod directory: %w", err)
	}
	if err := podpath.MkdirAll(h.opts.PodLogsDir, logDir, 0o755); err != nil {
		return fmt.Errorf("create the pod log directory: %w", err)
	}
	return nil
}

// CleanupPodDir removes the pod's state directory after the pod has
// terminated: it first unmounts what berth mounted under it (subPath bind
// mounts, whose mount points it removes without descending into them, and
// tmpfs emptyDirs), so RemoveAll never descends into a live mount, then
// removes the tree. A missing directory is success, so the agent may call
// it again after a crash. Logs under PodLogsDir are left to container GC.
func (h *Host) CleanupPodDir(uid types.UID) error {
	if uid == "" {
		return errors.New("cleanup pod directory: empty pod UID")
	}
	dir, err := h.PodDir(uid)
	if err != nil {
		return fmt.Errorf("cleanup pod directory: %w", err)
	}
	// A bind mount of a subPath may be of a host directory: RemoveAll
	// must never meet one, so they go first and a failure stops here.
	if err := cleanSubPathMounts(dir); err != nil {
		return fmt.Errorf("cleanup pod directory %s: %w", dir, err)
	}
	mounts, err := mountPointsUnder(dir)
	if err != nil {
		return fmt.Errorf("cleanup pod directory %s: %w", dir, err)
	}
	for _, mp := range mounts {
		if err := unmount(mp); err != nil {
			return fmt.Errorf("cleanup pod directory %s: %w", dir, err)
		}
	}
	// RemoveAll unlinks symbolic links, never follows them, whether dir
	// itself is one or one was planted inside.
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("cleanup pod directory: %w", err)
	}
	return nil
}

// mountPointsUnder lists the mount points at or below dir, deepest first so
// they can be unmounted in order.
func mountPointsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// Field 5 (index 4) is the mount point, octal-escaped.
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			if !slices.Contains(out, mp) {
				out = append(out, mp)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out, nil
}

// isMountPoint reports whether path is a mount point of its own.
func isMountPoint(path string) (bool, error) {
	mps, err := mountPointsUnder(path)
	if err != nil {
		return false, err
	}
	return slices.Contains(mps, path), nil
}

// unescapeMountPath undoes the kernel's octal escaping of spaces, tabs,
// newlines and backslashes in /proc/self/mountinfo.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, ok := octal3(s[i+1 : i+4]); ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// octal3 parses three octal digits.
func octal3(s string) (byte, bool) {
	if len(s) != 3 {
		return 0, false
	}
	var v int
	for _, c := range s {
		if c < '0' || c > '7' {
			return 0, false
		}
		v = v*8 + int(c-'0')
	}
	return byte(v), v <= 0xff
}

// unmount detaches a mount point, lazily if it is busy, so a process still
// holding the tmpfs open does not block the pod's cleanup forever. A
// symbolic link at path is not followed.
func unmount(path string) error {
	err := unix.Unmount(path, unix.UMOUNT_NOFOLLOW)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(path, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	return nil
}
