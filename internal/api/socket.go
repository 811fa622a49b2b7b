package api

import (
	"net"
	"os"

	"github.com/berth-agent/berth/internal/unixsocket"
)

// socketMode lets root and the socket's group talk to berth, nobody else:
// the socket serves pod specs, events and logs, which may hold secrets.
const socketMode = 0o660

// socketGroupDirMode is the mode of a socket directory berth creates for
// an admin group: the group may enter it to reach the socket, others not.
const socketGroupDirMode = 0o750

// listenUnix creates the API's unix socket at path with mode socketMode,
// owned by berth's user and group gid (0: berth's own group, root's), as
// unixsocket.Listen does: in a directory berth owns, created when missing
// (0755, or 0750 and of group gid when gid is set), a stale socket or
// anything else at path replaced without being followed.
func listenUnix(path string, gid int) (net.Listener, error) {
	dirMode := os.FileMode(0o755)
	if gid != 0 {
		dirMode = socketGroupDirMode
	}
	return unixsocket.Listen(path, unixsocket.Modes{Mode: socketMode, DirMode: dirMode, Group: gid})
}
