package statefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// notWritable are the permission bits a file or directory berth trusts
// must not have: another user who could write it would choose what berth
// reads from it.
const notWritable os.FileMode = 0o022

// notReadable are the further bits a secret must not have.
const notReadable os.FileMode = 0o044

// MakePrivateDir creates dir (0700) under parents made as the runtime
// manager makes --root-dir (0750), and checks that dir is berth's alone:
// every piece of state berth keeps across restarts lives in such a
// directory, and one that another user could write would let them choose
// the pods berth runs.
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
	return checkOwned(info, true, notWritable)
}

// CheckOwnedDir checks a directory berth trusts the files of: itself, not
// a symbolic link, owned by berth's user and writable by no one else.
func CheckOwnedDir(dir string) error {
	info, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	return checkOwned(info, true, notWritable)
}

// ReadOwned reads a file berth wrote or trusts: opened without following a
// final symbolic link or blocking, a regular file owned by berth's user,
// writable by no one else, and of at most maxBytes.
func ReadOwned(path string, maxBytes int64) ([]byte, error) {
	return read(path, maxBytes, notWritable)
}

// ReadPrivate reads a secret as ReadOwned does, and refuses it also when
// group or others may read it.
func ReadPrivate(path string, maxBytes int64) ([]byte, error) {
	return read(path, maxBytes, notWritable|notReadable)
}

// read opens path with O_NOFOLLOW|O_NONBLOCK and checks the open file, not
// the name, so that nothing is swapped in between the check and the read.
func read(path string, maxBytes int64, forbidden os.FileMode) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkOwned(info, false, forbidden); err != nil {
		return nil, err
	}
	if info.Size() > maxBytes {
		return nil, tooLarge(maxBytes)
	}
	// The file may grow after the stat: the read is bounded too.
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > maxBytes {
		return nil, tooLarge(maxBytes)
	}
	return data, nil
}

func tooLarge(maxBytes int64) error {
	return fmt.Errorf("larger than the limit of %d bytes", maxBytes)
}

// checkOwned checks a state file or directory is what berth made: of the
// expected type (never a symlink), owned by berth's user, and without the
// forbidden permission bits.
func checkOwned(info os.FileInfo, dir bool, forbidden os.FileMode) error {
	perm := info.Mode().Perm()
	switch {
	case dir && !info.IsDir():
		return fmt.Errorf("not a directory (%s)", info.Mode().Type())
	case !dir && !info.Mode().IsRegular():
		return fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	case perm&notWritable != 0:
		return fmt.Errorf("writable by group or others (mode %s)", perm)
	case perm&forbidden != 0:
		return fmt.Errorf("readable by group or others (mode %s)", perm)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("owned by uid %d, not %d", st.Uid, os.Geteuid())
	}
	return nil
}

// WriteAtomic replaces dir/name with data (mode perm) durably before it
// returns: a temporary file in dir written and fsynced, renamed over
// dir/name, and dir fsynced. A reader, after berth was killed anywhere or
// the power cut, sees the old content or the new, never a mix. For state
// that must hold before berth acts on it.
func WriteAtomic(dir, name string, data []byte, perm os.FileMode) error {
	if err := replace(dir, name, data, perm, true); err != nil {
		return err
	}
	return SyncDir(dir)
}

// Replace replaces dir/name with data (mode perm) through a rename as
// WriteAtomic does, without waiting for the disk: a reader sees the old
// content or the new, and the caller makes it durable with SyncFile and
// SyncDir, once for many files. The rename replaces a symbolic link at
// dir/name, never writes through it.
func Replace(dir, name string, data []byte, perm os.FileMode) error {
	return replace(dir, name, data, perm, false)
}

// replace writes data to a temporary file in dir (named after name,
// beginning with a dot so that listings of state skip it), fsynced first
// when durable, and renames it over dir/name. The temporary file is
// removed on failure.
func replace(dir, name string, data []byte, perm os.FileMode, durable bool) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		// CreateTemp makes 0600; Chmod is not cut by the umask.
		err = f.Chmod(perm)
	}
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// SyncFile makes a written file's content durable.
func SyncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// SyncDir makes a rename or removal in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// ListDir lists the names in a state directory; a missing directory is
// empty, since state that was never written is no state.
func ListDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, err
}
