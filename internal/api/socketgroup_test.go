package api

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// dialAsEnv, when set to a socket path, makes the test binary dial it and
// exit 0 on success (TestSocketGroupDialHelper): the connect of another
// user, which a goroutine of this process cannot be.
const dialAsEnv = "BERTH_API_TEST_DIAL"

func TestSocketGroupDialHelper(t *testing.T) {
	path := os.Getenv(dialAsEnv)
	if path == "" {
		t.Skip("only run as the other user of TestListenUnixSocketGroup")
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(3)
	}
	c.Close()
	os.Exit(0)
}

// TestListenUnixSocketGroup: with a socket group the socket is 0660 of
// that group in a directory berth creates 0750 of that group, so a member
// of the group connects while another user does not; without one, only
// root does. A directory the group cannot enter is refused, naming the fix.
func TestListenUnixSocketGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the socket a group and dial as other users")
	}
	const member, outsider = 65534, 65533
	// A copy of this binary the other users can run, under directories
	// they can enter.
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "api.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	dialAs := func(socket string, uid int) error {
		cmd := exec.Command(bin, "-test.run=^TestSocketGroupDialHelper$")
		cmd.Env = append(os.Environ(), dialAsEnv+"="+socket)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: out}
		}
		return nil
	}

	tests := []struct {
		name       string
		gid        int
		wantDir    os.FileMode
		admitted   map[int]bool
		wantSocket uint32
	}{
		{"no group: root alone", 0, 0o755, map[int]bool{member: false, outsider: false}, 0},
		{"admin group", member, socketGroupDirMode, map[int]bool{member: true, outsider: false}, member},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(base, "run"+string(rune('a'+i)), "berth")
			socket := filepath.Join(dir, "berth.sock")
			l, err := listenUnix(socket, tt.gid)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			d, _ := os.Stat(dir)
			s, _ := os.Lstat(socket)
			if d.Mode().Perm() != tt.wantDir || d.Sys().(*syscall.Stat_t).Gid != tt.wantSocket {
				t.Errorf("directory %v group %d, want %v group %d", d.Mode().Perm(), d.Sys().(*syscall.Stat_t).Gid, tt.wantDir, tt.wantSocket)
			}
			if s.Mode().Perm() != socketMode || s.Sys().(*syscall.Stat_t).Gid != tt.wantSocket || s.Sys().(*syscall.Stat_t).Uid != 0 {
				t.Errorf("socket %v %d:%d, want %v 0:%d", s.Mode().Perm(), s.Sys().(*syscall.Stat_t).Uid, s.Sys().(*syscall.Stat_t).Gid, socketMode, tt.wantSocket)
			}
			for uid, want := range tt.admitted {
				if err := dialAs(socket, uid); (err == nil) != want {
					var stderr []byte
					if ee, ok := err.(*exec.ExitError); ok {
						stderr = ee.Stderr
					}
					t.Errorf("uid %d: dial error %v %s, want admitted %v", uid, err, stderr, want)
				}
			}
		})
	}

	t.Run("a directory the group cannot enter", func(t *testing.T) {
		dir := filepath.Join(base, "closed")
		mkdir(t, dir, 0o700)
		_, err := listenUnix(filepath.Join(dir, "berth.sock"), member)
		if err == nil || !strings.Contains(err.Error(), "cannot be entered by the socket's group 65534") {
			t.Fatalf("listenUnix: %v", err)
		}
	})
}
