package unixsocket

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// Modes are who may use a socket: Mode is the socket's, DirMode the mode
// of its directory when Listen creates it, Group the group both are given
// (0 leaves them root's group).
type Modes struct {
	Mode    os.FileMode
	DirMode os.FileMode
	Group   int
}

// Listen creates a unix socket at path with m.Mode, owned by berth's user
// and group m.Group (0: berth's own group, root's).
//
// The directory must be berth's own: whoever can write to it can replace
// the socket with theirs and impersonate berth to its clients. It is
// created when missing (m.DirMode, of group m.Group when set), and refused
// when it exists with another owner or writable by group or others, or,
// with m.Group set, when the group cannot enter it.
//
// The mode cannot be set on the listening descriptor (fchmod on a socket
// changes the socket's inode, not the file a client connects through), and
// a chmod by path after bind would follow a symlink someone slipped in.
// So the socket is bound inside a fresh 0700 directory nobody else can
// enter, chmodded there, and renamed into place; rename replaces whatever
// is at path (a stale socket of a crashed run, a symlink, a file) without
// following it. The listener does not remove path when closed: its owner
// removes it when it stops serving.
func Listen(path string, m Modes) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := ensureDir(dir, m); err != nil {
		return nil, err
	}
	private, err := os.MkdirTemp(dir, ".berth-socket-")
	if err != nil {
		return nil, fmt.Errorf("socket %s: private directory: %w", path, err)
	}
	defer os.RemoveAll(private)
	tmp := filepath.Join(private, "s")
	l, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// The name the listener was bound to goes away with the rename.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	if m.Group != 0 {
		// In the private directory nobody else can swap the name.
		if err := os.Lchown(tmp, -1, m.Group); err != nil {
			l.Close()
			return nil, fmt.Errorf("socket %s: give it group %d: %w", path, m.Group, err)
		}
	}
	if err := os.Chmod(tmp, m.Mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("socket %s: chmod: %w", path, err)
	}
	if info, err := os.Lstat(path); err == nil && info.IsDir() {
		l.Close()
		return nil, fmt.Errorf("socket %s: a directory is in the way", path)
	}
	if err := os.Rename(tmp, path); err != nil {
		l.Close()
		return nil, fmt.Errorf("socket %s: move into place: %w", path, err)
	}
	return l, nil
}

// ensureDir creates dir when missing (m.DirMode, of group m.Group when
// set), and otherwise checks that it is a directory owned by berth's user
// and not writable by group or others, as sshd's StrictModes checks a
// user's files; with a group set, also that the group may enter it. An
// existing directory is never changed: it may be /run itself.
func ensureDir(dir string, m Modes) error {
	info, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		// Parents as before (0755); the socket's own directory with its
		// mode, so that nobody is kept out of anything above it.
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return fmt.Errorf("socket directory %s: %w", dir, err)
		}
		if err := os.Mkdir(dir, m.DirMode); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("socket directory %s: %w", dir, err)
		}
		if m.Group != 0 {
			if err := os.Lchown(dir, -1, m.Group); err != nil {
				return fmt.Errorf("socket directory %s: give it group %d: %w", dir, m.Group, err)
			}
			// Mkdir's mode is cut by the umask.
			if err := os.Chmod(dir, m.DirMode); err != nil {
				return fmt.Errorf("socket directory %s: %w", dir, err)
			}
		}
		info, err = os.Lstat(dir)
	}
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory (%s): berth creates its socket only in a directory it owns", dir, info.Mode().Type())
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("socket directory %s: no owner information", dir)
	}
	euid := os.Geteuid()
	if int(st.Uid) != euid || info.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("socket directory %s is owned by uid %d with mode %04o: berth needs it owned by uid %d and not writable by group or others,"+
			" or another user could replace the socket and impersonate berth (chown %d %s; chmod go-w %s; or choose another path)",
			dir, st.Uid, info.Mode().Perm(), euid, euid, dir, dir)
	}
	perm := info.Mode().Perm()
	if m.Group != 0 && perm&0o001 == 0 && (int(st.Gid) != m.Group || perm&0o010 == 0) {
		return fmt.Errorf("socket directory %s (group %d, mode %04o) cannot be entered by the socket's group %d: its members could not reach the socket"+
			" (chgrp %d %s; chmod 0750 %s; or let berth create the directory)", dir, st.Gid, perm, m.Group, m.Group, dir, dir)
	}
	return nil
}
