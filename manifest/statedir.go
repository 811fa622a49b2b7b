package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// MakePrivateDir creates dir (0700) under parents made as the runtime
// manager makes --root-dir (0750), and checks that dir is berth's alone:
// every piece of state berth keeps across restarts (last good manifests,
// accepted serials, rollbacks) lives in such a directory, and one that
// another user could write would let them choose the pods berth runs.
func MakePrivateDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	return OwnedByUs(info, true)
}

// OwnedByUs checks a state file or directory is what berth made: of the
// expected type (never a symlink), owned by berth's user, and writable by
// no one else.
func OwnedByUs(info os.FileInfo, dir bool) error {
	switch {
	case dir && !info.IsDir():
		return fmt.Errorf("not a directory (%s)", info.Mode().Type())
	case !dir && !info.Mode().IsRegular():
		return fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	case info.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("writable by group or others (mode %s)", info.Mode().Perm())
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("owned by uid %d, not %d", st.Uid, os.Geteuid())
	}
	return nil
}
