package doctor

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestCheckSocket: berth's own socket is root's, mode 0660 or tighter,
// in a directory only root can write.
func TestCheckSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the socket must be root's; needs root")
	}
	tests := []struct {
		name   string
		setup  func(t *testing.T, dir, sock string)
		want   Status
		wantIn string
	}{
		{"0660", func(t *testing.T, dir, sock string) { listen(t, sock, 0o660) }, OK, "is root's, mode 0660"},
		{"0600", func(t *testing.T, dir, sock string) { listen(t, sock, 0o600) }, OK, "mode 0600"},
		{"world-connectable", func(t *testing.T, dir, sock string) { listen(t, sock, 0o666) }, Fail, "mode 0666: every local user can read"},
		{"executable bits", func(t *testing.T, dir, sock string) { listen(t, sock, 0o770) }, Warn, "wider than the 0660"},
		{"owned by nobody", func(t *testing.T, dir, sock string) {
			listen(t, sock, 0o660)
			if err := os.Lchown(sock, 65534, -1); err != nil {
				t.Fatal(err)
			}
		}, Fail, "owned by uid 65534, not root"},
		{"not running", func(t *testing.T, dir, sock string) {}, Warn, "berth is not running"},
		{"not a socket", func(t *testing.T, dir, sock string) { writeFile(t, sock, "", 0o600) }, Fail, "is not a socket"},
		{"group-writable directory", func(t *testing.T, dir, sock string) {
			listen(t, sock, 0o660)
			if err := os.Chmod(dir, 0o775); err != nil {
				t.Fatal(err)
			}
		}, Fail, "another user could replace the socket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(dir, "berth.sock")
			tt.setup(t, dir, sock)
			checkResult(t, checkSocket(sock), tt.want, tt.wantIn)
		})
	}
	checkResult(t, checkSocket(""), OK, "no --socket")
}

// listen makes a unix socket at path with mode, closed when t ends.
func listen(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestSocketServer: the PID listening on a socket is this process's for a
// socket it listens on; 0 with no socket, nobody listening, or none asked.
func TestSocketServer(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "berth.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if got := socketServer(sock); got != os.Getpid() {
		t.Errorf("socketServer of a socket this process listens on = %d, want %d", got, os.Getpid())
	}
	l.Close()
	for _, path := range []string{sock, filepath.Join(dir, "none.sock"), ""} {
		if got := socketServer(path); got != 0 {
			t.Errorf("socketServer(%q) = %d, want 0", path, got)
		}
	}
}
