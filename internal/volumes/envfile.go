package volumes

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// maxEnvFileBytes bounds an env file read for fileKeyRef (KEP-3721). The
// file is written by a container, so its size is the container's choice:
// berth reads at most this much into its own memory per variable, and
// refuses a larger file rather than reading part of it.
const maxEnvFileBytes = 64 << 10

// FileKeyValue resolves a fileKeyRef (KEP-3721, environment from files):
// the value of ref.Key in the env file ref.Path of the pod's emptyDir
// volume ref.VolumeName, typically written by an init container. found is
// false when the file or the key is absent and ref.Optional is true; when
// it is not optional that is an error, and the container does not start
// (CreateContainerConfigError), as with the kubelet.
func (h *Host) FileKeyValue(pod *v1.Pod, ref *v1.FileKeySelector) (value string, found bool, err error) {
	optional := ref.Optional != nil && *ref.Optional
	dir, err := h.emptyDirPath(pod.UID, ref.VolumeName)
	if err != nil {
		return "", false, fmt.Errorf("fileKeyRef volume %q: %w", ref.VolumeName, err)
	}
	data, err := readEnvFile(dir, ref.Path)
	switch {
	case errors.Is(err, os.ErrNotExist) && optional:
		return "", false, nil
	case errors.Is(err, os.ErrNotExist):
		return "", false, fmt.Errorf("fileKeyRef: file %q does not exist in volume %q (set optional: true to start without it)", ref.Path, ref.VolumeName)
	case err != nil:
		return "", false, fmt.Errorf("fileKeyRef: file %q in volume %q: %w", ref.Path, ref.VolumeName, err)
	}
	value, found, err = envFileValue(data, ref.Key)
	switch {
	case err != nil:
		return "", false, fmt.Errorf("fileKeyRef: file %q in volume %q: %w", ref.Path, ref.VolumeName, err)
	case !found && !optional:
		return "", false, fmt.Errorf("fileKeyRef: key %q is not in file %q of volume %q (set optional: true to start without it)", ref.Key, ref.Path, ref.VolumeName)
	}
	return value, found, nil
}

// readEnvFile reads the regular file rel inside the volume directory dir.
// The volume is writable by the pod's containers, which may plant a
// symbolic link to a host file (/etc/shadow) or a FIFO there: the path is
// resolved so that it cannot leave dir (openBeneath), it is opened
// non-blocking and must be a regular file, and at most maxEnvFileBytes are
// read.
func readEnvFile(dir, rel string) ([]byte, error) {
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(root)
	fd, err := openBeneath(root, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY)
	if errors.Is(err, errLeavesVolume) {
		return nil, err
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if fi.Size() > maxEnvFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxEnvFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxEnvFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxEnvFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxEnvFileBytes)
	}
	return data, nil
}

// errLeavesVolume is a path that would resolve outside its volume.
var errLeavesVolume = errors.New("the path leaves the volume")

// openBeneath opens rel below the directory root with flags. With openat2
// (Linux 5.6 and later) the kernel resolves it with RESOLVE_BENEATH and no
// magic links: links are followed while they stay below root. Without
// openat2, rel is walked a component at a time with O_NOFOLLOW, and a
// symbolic link anywhere in it is refused (ELOOP) rather than resolved by
// hand: a ".." is refused in both cases.
func openBeneath(root int, rel string, flags int) (int, error) {
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(root, rel, &unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
		switch {
		case errors.Is(err, unix.EXDEV):
			return -1, errLeavesVolume
		case !errors.Is(err, unix.ENOSYS):
			return fd, err
		}
		noOpenat2.Store(true)
	}
	parts := strings.Split(rel, "/")
	if slices.Contains(parts, "..") || path.IsAbs(rel) {
		return -1, errLeavesVolume
	}
	dirfd, opened := root, -1
	for i, name := range parts {
		if name == "" || name == "." {
			continue
		}
		fl := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW
		if i == len(parts)-1 {
			fl = flags | unix.O_NOFOLLOW
		}
		fd, err := unix.Openat(dirfd, name, fl, 0)
		if errors.Is(err, unix.ENOTDIR) && isLink(dirfd, name) {
			// O_DIRECTORY|O_NOFOLLOW says ENOTDIR of a link.
			err = unix.ELOOP
		}
		if opened >= 0 {
			unix.Close(opened)
		}
		if errors.Is(err, unix.ELOOP) {
			return -1, fmt.Errorf("%w: %q is a symbolic link, which berth does not follow on a kernel without openat2 (before Linux 5.6)", unix.ELOOP, name)
		}
		if err != nil {
			return -1, err
		}
		dirfd, opened = fd, fd
	}
	if opened < 0 {
		return unix.Openat(root, ".", flags, 0)
	}
	return opened, nil
}

// isLink reports whether name in dirfd is a symbolic link.
func isLink(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// envFileValue finds key in an env file in the kubelet's format for
// fileKeyRef (KEP-3721, the strict subset of POSIX shell assignments of
// Kubernetes 1.35 on):
//   - blank lines and lines whose first non-blank character is '#' are
//     skipped; leading blanks are ignored;
//   - an assignment is NAME='value': no blank before '=', the value in
//     single quotes, taken literally (no escapes, no expansion), and it may
//     span lines; after the closing quote only blanks and a '#' comment;
//   - NAME= followed by the end of the line or a blank assigns "" (as a
//     shell would, the rest of the line is not the value);
//   - anything else (an unquoted value, a missing '=' or quote) is an error
//     naming the line, for the whole file, whichever key is asked for.
//
// The first assignment of key wins. found is false when no line assigns it.
func envFileValue(data []byte, key string) (value string, found bool, err error) {
	s := string(data)
	if strings.IndexByte(s, 0) >= 0 {
		return "", false, errors.New("contains a NUL byte")
	}
	line := 1
	for len(s) > 0 {
		start := line
		// Leading blanks, then a blank or comment line.
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			break
		}
		if s[0] == '\n' || s[0] == '#' {
			nl := strings.IndexByte(s, '\n')
			if nl < 0 {
				break
			}
			s = s[nl+1:]
			line++
			continue
		}
		eq := strings.IndexAny(s, "=\n")
		if eq < 0 || s[eq] != '=' {
			return "", false, fmt.Errorf("line %d: not NAME='value'", start)
		}
		name := s[:eq]
		if name == "" {
			return "", false, fmt.Errorf("line %d: no name before '='", start)
		}
		if strings.ContainsAny(name, " \t") {
			return "", false, fmt.Errorf("line %d: blank before '=' in %q", start, strings.TrimRight(name, " \t"))
		}
		s = s[eq+1:]
		var v string
		switch {
		case s == "" || s[0] == '\n' || s[0] == ' ' || s[0] == '\t':
			// An empty assignment; what follows on the line is no value.
		case s[0] == '\'':
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return "", false, fmt.Errorf("line %d: the quote opened here is never closed", start)
			}
			v = s[1 : 1+end]
			line += strings.Count(v, "\n")
			s = s[2+end:]
			rest := s
			if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
				rest = rest[:nl]
			}
			if t := strings.TrimLeft(rest, " \t"); t != "" && t[0] != '#' {
				return "", false, fmt.Errorf("line %d: unexpected %q after the closing quote", line, t)
			}
		default:
			return "", false, fmt.Errorf("line %d: the value of %s must be in single quotes (%s='...')", start, name, name)
		}
		if !found && name == key {
			value, found = v, true
		}
		nl := strings.IndexByte(s, '\n')
		if nl < 0 {
			break
		}
		s = s[nl+1:]
		line++
	}
	return value, found, nil
}
