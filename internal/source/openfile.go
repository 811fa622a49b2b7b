package source

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// ReasonNotRegular is a manifest name that is not a regular file (a FIFO,
// a socket, a device): reading one could block berth for ever.
const ReasonNotRegular = "NotRegularFile"

// notRegularError refuses what is not a regular file.
type notRegularError struct {
	path string
	mode fs.FileMode
}

func (e *notRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file; only regular files are read as manifests", e.path, kindOfFile(e.mode))
}

func kindOfFile(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	case mode.IsDir():
		return "a directory"
	}
	return "not a plain file (mode " + mode.String() + ")"
}

// openedManifest is what readManifestFile read.
type openedManifest struct {
	data []byte
	// info is the fstat of the file read, not of whatever the path names
	// by now.
	info fs.FileInfo
	// perm is set when the file, or a directory it really lives in, may
	// be written by someone other than root: the caller refuses the file
	// or, with --manifest-permissions=warn, logs it.
	perm error
}

// readManifestFile reads a manifest without ever blocking. Only regular
// files are read: stat before opening keeps berth from opening a device at
// all, O_NONBLOCK makes a FIFO swapped in meanwhile open at once instead of
// waiting for a writer, and fstat after opening refuses it. At most
// maxBytes+1 bytes are read, enough to tell a file past the limit.
//
// The path is followed through symlinks on purpose: a ConfigMap-style
// directory (x.yaml -> ..data/x.yaml, ..data -> ..2024_01_01) swaps its
// content that way, as the kubelet follows it, so O_NOFOLLOW is not used.
// Instead the directory the opened file really lives in (from
// /proc/self/fd) is checked along with the file's own owner and mode.
func readManifestFile(path string, maxBytes int64) (openedManifest, error) {
	info, err := os.Stat(path)
	if err != nil {
		return openedManifest{}, err
	}
	if !info.Mode().IsRegular() {
		return openedManifest{}, &notRegularError{path, info.Mode()}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return openedManifest{}, err
	}
	defer f.Close()
	info, err = f.Stat()
	if err != nil {
		return openedManifest{}, fmt.Errorf("stat %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return openedManifest{}, &notRegularError{path, info.Mode()}
	}
	out := openedManifest{info: info, perm: checkManifestFile(path, info)}
	if out.perm == nil {
		out.perm = checkRealDir(f, path)
	}
	out.data, err = io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return openedManifest{}, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

// checkRealDir checks the directories of the file f actually is, after
// every symlink on its path was followed.
func checkRealDir(f *os.File, path string) error {
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil || !filepath.IsAbs(real) {
		// No /proc: resolve the path instead, a little racier.
		if real, err = filepath.EvalSymlinks(path); err != nil {
			return &permissionError{fmt.Sprintf("cannot tell the directory of manifest %s: %v", path, err)}
		}
		if real, err = filepath.Abs(real); err != nil {
			return &permissionError{fmt.Sprintf("cannot tell the directory of manifest %s: %v", path, err)}
		}
	}
	if err := checkDirChain(filepath.Dir(real)); err != nil {
		if isPermissionError(err) {
			return err
		}
		return &permissionError{err.Error()}
	}
	return nil
}
