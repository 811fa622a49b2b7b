package volumes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podpath"
)

// A volumeMount's subPath names a path inside a volume the pod's containers
// can write to: between two starts a container may replace any directory
// of it with a symbolic link to anywhere on the host, and, while berth
// prepares the mount, a second container of the pod may swap one in.
// Resolving the subPath by name, checking where it leads and handing that
// name to the runtime would let the link redirect berth's mkdir and chmod,
// and the runtime's bind, to the host. So, as the kubelet does, berth
//
//   - walks the subPath one component at a time from an open descriptor of
//     the volume, opening each without following it (openat2 with
//     RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or openat with O_NOFOLLOW on
//     kernels without openat2), creating missing directories with mkdirat
//     and giving them the volume's permissions with fchmod on the opened
//     directory;
//   - bind-mounts the opened descriptor (/proc/self/fd/N) onto a mount point
//     of its own, RootDir/pods/<uid>/volume-subpaths/<volume>/<container>/
//     <index of the volumeMount>, and hands the runtime that path, which no
//     container can reach and which names the inode berth opened whatever
//     happens to the subPath's name afterwards.
//
// Symbolic links inside the volume are followed, as the kubelet follows
// them (a configMap's files are links into its ..data directory; an
// emptyDir may hold a "current" link to a release directory), but berth
// resolves them itself, component by component from the directories it
// holds open, so the rules are the same on every kernel: a link whose ".."
// would climb above the volume is refused, and so is any absolute link,
// which a container wrote with its own root in mind, not the host's. The
// volume's own path (a hostPath) is the operator's and may go through
// links.

// volumeSubpathsDir is the directory of a pod's subPath mount points,
// named as the kubelet names it.
const volumeSubpathsDir = "volume-subpaths"

// maxSymlinks bounds the links one subPath may go through, the kernel's
// own bound: a loop of links is refused, not followed forever.
const maxSymlinks = 40

// noOpenat2 is set once the kernel said it has no openat2; the walk then
// uses openat with O_NOFOLLOW, which is as safe for single components.
var noOpenat2 atomic.Bool

// errLeaves is a symbolic link in a subPath that leads out of the volume.
var errLeaves = errors.New("is a symbolic link that leads out of the volume")

// checkSubPath refuses a subPath that is absolute or has a ".." component:
// the kubelet's rules, applied whether it came from subPath or subPathExpr.
func checkSubPath(subPath string) error {
	if filepath.IsAbs(subPath) {
		return errors.New("must be a relative path")
	}
	if slices.Contains(strings.Split(subPath, "/"), "..") {
		return errors.New(`must not contain ".."`)
	}
	return nil
}

// openChild opens name, a single path component, in the directory dirfd
// without following it if it is a symbolic link.
func openChild(dirfd int, name string, flags int) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{
			Flags:   uint64(flags),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if !errors.Is(err, unix.ENOSYS) {
			return fd, err
		}
		noOpenat2.Store(true)
	}
	return unix.Openat(dirfd, name, flags, 0)
}

// subPathWalk is a walk down a volume: the directories open from the
// volume's root to the current one, and their names inside the volume.
type subPathWalk struct {
	fds   []int
	names []string
	perm  uint32 // the volume's permission bits, for directories made
}

// rel is name's path inside the volume, for messages.
func (w *subPathWalk) rel(name string) string {
	return path.Join(path.Join(w.names...), name)
}

// close closes the directories still open.
func (w *subPathWalk) close() {
	for _, fd := range w.fds {
		unix.Close(fd)
	}
}

// openSubPath opens subPath inside the directory volumePath, creating
// missing directories with the volume's permission bits, and returns the
// open file (an O_PATH descriptor when it already existed). Symbolic links
// are followed only while they stay inside the volume. It never creates,
// changes or opens anything outside the volume.
func openSubPath(volumePath, subPath string) (*os.File, error) {
	if err := checkSubPath(subPath); err != nil {
		return nil, err
	}
	rootfd, err := unix.Open(volumePath, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("volume path: %w", &os.PathError{Op: "open", Path: volumePath, Err: err})
	}
	w := &subPathWalk{fds: []int{rootfd}}
	defer w.close()
	var root unix.Stat_t
	if err := unix.Fstat(rootfd, &root); err != nil {
		return nil, fmt.Errorf("volume path: %w", &os.PathError{Op: "stat", Path: volumePath, Err: err})
	}
	w.perm = root.Mode & 0o777
	rest := strings.Split(subPath, "/")
	links, via := 0, ""
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			// Only a link's target has one: checkSubPath refused
			// them in the subPath.
			if len(w.fds) == 1 {
				return nil, fmt.Errorf("%q %w", via, errLeaves)
			}
			unix.Close(w.fds[len(w.fds)-1])
			w.fds, w.names = w.fds[:len(w.fds)-1], w.names[:len(w.names)-1]
			continue
		}
		rel := w.rel(name)
		fd, err := w.step(name, rel, !slices.ContainsFunc(rest, func(s string) bool { return s != "" && s != "." }))
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			target, isLink, lerr := readLink(w.fds[len(w.fds)-1], name)
			switch {
			case lerr != nil:
				return nil, &os.PathError{Op: "readlink", Path: rel, Err: lerr}
			case isLink && path.IsAbs(target):
				return nil, fmt.Errorf("%q %w", rel, errLeaves)
			case isLink && links == maxSymlinks:
				return nil, fmt.Errorf("%q: more than %d symbolic links", subPath, maxSymlinks)
			case isLink:
				links, via = links+1, rel
				rest = append(strings.Split(target, "/"), rest...)
				continue
			case errors.Is(err, unix.ENOTDIR):
				return nil, fmt.Errorf("%q is not a directory", rel)
			}
		}
		if err != nil {
			return nil, err
		}
		w.fds, w.names = append(w.fds, fd), append(w.names, name)
	}
	fd := w.fds[len(w.fds)-1]
	w.fds = w.fds[:len(w.fds)-1]
	return os.NewFile(uintptr(fd), filepath.Join(volumePath, filepath.Join(w.names...))), nil
}

// step opens the component name of the current directory, making it a
// directory if it is missing; a symbolic link is not followed but reported
// as ELOOP. The last component, whatever it is (a file, a socket, a
// device), is opened O_PATH, without side effects.
func (w *subPathWalk) step(name, rel string, last bool) (int, error) {
	dirfd := w.fds[len(w.fds)-1]
	flags := unix.O_RDONLY | unix.O_DIRECTORY
	if last {
		flags = unix.O_PATH
	}
	fd, err := openChild(dirfd, name, flags)
	if errors.Is(err, unix.ENOENT) {
		return makeChild(dirfd, name, rel, w.perm)
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	if last {
		// openat with O_PATH|O_NOFOLLOW opens a link itself.
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, &os.PathError{Op: "stat", Path: rel, Err: err}
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(fd)
			return -1, &os.PathError{Op: "open", Path: rel, Err: unix.ELOOP}
		}
	}
	return fd, nil
}

// readLink reads the symbolic link name in dirfd; isLink is false when
// name is something else.
func readLink(dirfd int, name string) (target string, isLink bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return "", false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return "", false, nil
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", false, err
	}
	if n == len(buf) {
		return "", false, unix.ENAMETOOLONG
	}
	return string(buf[:n]), true, nil
}

// makeChild creates the directory name in dirfd and opens it, then gives it
// perm past the umask through the descriptor. If something else took the
// name meanwhile, the open refuses it unless it is a directory. rel names
// it in errors.
func makeChild(dirfd int, name, rel string, perm uint32) (int, error) {
	created := true
	if err := unix.Mkdirat(dirfd, name, perm); errors.Is(err, unix.EEXIST) {
		created = false
	} else if err != nil {
		return -1, &os.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	fd, err := openChild(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	if created {
		if err := unix.Fchmod(fd, perm); err != nil {
			unix.Close(fd)
			return -1, &os.PathError{Op: "chmod", Path: rel, Err: err}
		}
	}
	return fd, nil
}

// subPathTarget is the mount point of a container's volumeMount with a
// subPath, under the pod's directory.
func (h *Host) subPathTarget(uid types.UID, volume, container string, index int) (string, error) {
	return h.podSubdir(uid, volumeSubpathsDir, volume, container, strconv.Itoa(index))
}

// PrepareSubPath opens the subPath inside the volume at volumePath and
// bind-mounts it on the volumeMount's mount point, which it returns for
// the runtime. A mount point left from an earlier start is unmounted
// first, so a refused subPath leaves nothing mounted for it.
func (h *Host) PrepareSubPath(uid types.UID, volume, container string, index int, volumePath, subPath string) (string, error) {
	target, err := h.subPathTarget(uid, volume, container, index)
	if err != nil {
		return "", err
	}
	if err := podpath.MkdirAll(h.opts.RootDir, filepath.Dir(target), 0o750); err != nil {
		return "", fmt.Errorf("create the subPath mount point: %w", err)
	}
	if err := unmountAll(target); err != nil {
		return "", err
	}
	f, err := openSubPath(volumePath, subPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := bindSubPath(f, target); err != nil {
		return "", err
	}
	return target, nil
}

// bindSubPath bind-mounts the open file f onto target, a directory or an
// empty file as f is a directory or not, made in berth's own directory.
// The source is the descriptor, not a name: the mount is of what was
// opened even if the subPath's name now leads elsewhere.
func bindSubPath(f *os.File, target string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	if err := makeMountPoint(target, st.Mode&unix.S_IFMT == unix.S_IFDIR); err != nil {
		return err
	}
	src := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount the subPath on %s: %w", target, err)
	}
	return nil
}

// makeMountPoint makes target an empty directory (dir) or an empty file,
// replacing an unmounted one of the other kind left from an earlier start.
// It removes only with rmdir and unlink, so nothing it did not make goes.
func makeMountPoint(target string, dir bool) error {
	fail := func(err error) error {
		return fmt.Errorf("create the subPath mount point %s: %w", target, err)
	}
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fail(err)
	case fi.IsDir() == dir && (dir || fi.Mode().IsRegular()):
		return nil
	case fi.IsDir():
		if err := unix.Rmdir(target); err != nil {
			return fail(err)
		}
	default:
		if err := unix.Unlink(target); err != nil {
			return fail(err)
		}
	}
	if dir {
		if err := unix.Mkdir(target, 0o750); err != nil {
			return fail(err)
		}
		return nil
	}
	fd, err := unix.Open(target, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return fail(err)
	}
	return unix.Close(fd)
}

// maxStacked bounds the mounts unmountAll takes off one mount point.
const maxStacked = 64

// unmountAll detaches every mount stacked on path without following path
// if it is a symbolic link; a path that is no mount point, or missing, is
// done.
func unmountAll(path string) error {
	for range maxStacked {
		err := unix.Unmount(path, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after %d unmounts", path, maxStacked)
}

// cleanSubPathMounts unmounts and removes the pod's subPath mount points,
// those of a berth that died too, then their directories: the layout is
// volume-subpaths/<volume>/<container>/<index>, and it never descends into
// a mount point, only unmounts it and removes it with rmdir or unlink,
// which fail on anything still mounted or not empty. So a bind mount of a
// volume or of a host directory is never emptied, and the caller's removal
// of the pod directory, once this succeeded, meets none.
func cleanSubPathMounts(podDir string) error {
	dir := filepath.Join(podDir, volumeSubpathsDir)
	if err := cleanSubPathLevel(dir, 0); err != nil {
		return fmt.Errorf("clean subPath mounts: %w", err)
	}
	return nil
}

// cleanSubPathLevel empties dir, depth levels below volume-subpaths, and
// removes it: directories above the mount points are walked, mount points
// unmounted, and any other entry unlinked, never followed.
func cleanSubPathLevel(dir string, depth int) error {
	const mountPointDepth = 3
	if depth == mountPointDepth {
		if err := unmountAll(dir); err != nil {
			return err
		}
	}
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		if err := unix.Unlink(dir); err != nil && !errors.Is(err, unix.ENOENT) {
			return &os.PathError{Op: "unlink", Path: dir, Err: err}
		}
		return nil
	}
	if depth < mountPointDepth {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := cleanSubPathLevel(filepath.Join(dir, e.Name()), depth+1); err != nil {
				return err
			}
		}
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	return nil
}
