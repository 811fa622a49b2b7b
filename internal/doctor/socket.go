package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// checkSocket: the local API's socket is berth's and only root and its
// group can use it, as berth creates it: mode 0660 or tighter, owned by
// root, in a directory owned by root that group and others cannot write
// (whoever can write the directory can put their own socket there and
// impersonate berth to root's CLI). The directory may be world-searchable,
// as berth creates it (0755): the socket's mode is what keeps others out,
// since the socket serves pod specs, events and logs, which may hold
// Secrets. A missing socket is a WARN: berth is not running (yet).
func checkSocket(path string) Result {
	r := Result{Check: "socket"}
	if path == "" {
		r.Status, r.Message = OK, "no --socket: the local API has no socket"
		return r
	}
	dir := filepath.Dir(path)
	if problem := socketDirProblem(dir); problem != "" {
		r.Status, r.Message = Fail, problem
		r.Fix = fmt.Sprintf("chown root %s; chmod go-w %s", dir, dir)
		return r
	}
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		r.Status, r.Message = Warn, "no socket at "+path+": berth is not running (or runs with another --socket)"
		r.Fix = "systemctl start berth, once the other checks pass"
		return r
	}
	if err != nil {
		r.Status, r.Message = Warn, err.Error()
		r.Fix = "run berth doctor as root"
		return r
	}
	if info.Mode().Type() != fs.ModeSocket {
		r.Status, r.Message = Fail, fmt.Sprintf("%s is not a socket (%s): berth cannot listen there", path, info.Mode().Type())
		r.Fix = "remove it, or choose another --socket"
		return r
	}
	uid, gid := owner(info)
	perm := info.Mode().Perm()
	switch {
	case uid != 0:
		r.Status = Fail
		r.Message = fmt.Sprintf("socket %s is owned by uid %d, not root: that user can answer the CLI as berth, or read what it serves", path, uid)
		r.Fix = "stop whatever made it, remove it and restart berth (systemctl restart berth), which creates it as root"
	case perm&0o007 != 0:
		r.Status = Fail
		r.Message = fmt.Sprintf("socket %s is mode %04o: every local user can read pod specs, events and logs through it", path, perm)
		r.Fix = "chmod 0660 " + path + " (berth creates it so; restart berth if something changed it)"
	case perm&^0o660 != 0:
		r.Status = Warn
		r.Message = fmt.Sprintf("socket %s is mode %04o, wider than the 0660 berth creates", path, perm)
		r.Fix = "chmod 0660 " + path
	default:
		r.Status = OK
		r.Message = fmt.Sprintf("socket %s is root's, mode %04o (group %s)", path, perm, groupName(gid))
	}
	return r
}

// socketDirProblem says what is wrong with the socket's directory, or "".
func socketDirProblem(dir string) string {
	info, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err != nil {
		return err.Error()
	}
	if !info.IsDir() {
		return dir + " is not a directory: berth cannot create its socket there"
	}
	uid, _ := owner(info)
	if uid != 0 || info.Mode().Perm()&0o022 != 0 {
		return fmt.Sprintf("socket directory %s is owned by uid %d with mode %04o: another user could replace the socket and impersonate berth", dir, uid, info.Mode().Perm())
	}
	return ""
}

// owner returns the uid and gid owning info's file.
func owner(info fs.FileInfo) (uid, gid uint32) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Uid, st.Gid
	}
	return 0, 0
}

// groupName is gid's name, or its number when it has none.
func groupName(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(id); err == nil {
		return g.Name
	}
	return id
}

// socketServer is the PID of the process listening on the unix socket
// path, as the kernel recorded it when that process called listen
// (SO_PEERCRED of a connection to it); 0 when there is no socket, nobody
// listens or it cannot be asked. The connection is closed at once.
func socketServer(path string) int {
	if path == "" {
		return 0
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return 0
	}
	defer conn.Close()
	raw, err := conn.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	if err := raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	}); err != nil {
		return 0
	}
	return pid
}
