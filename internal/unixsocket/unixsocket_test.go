package unixsocket

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rootOnly = Modes{Mode: 0o600, DirMode: 0o700}

// TestListen: the socket gets its mode in a directory created with its
// own; whatever sits at the socket's path (a stale socket, a symlink, a
// file) is replaced and never followed or chmodded; a directory at the
// path, or a socket directory that is not berth's alone, is refused.
func TestListen(t *testing.T) {
	tests := []struct {
		name string
		// prepare readies dir (the socket's directory) and returns a file
		// that must keep its mode 0644, or "".
		prepare func(t *testing.T, dir, socket string) string
		wantErr string
	}{
		{"directory created", func(*testing.T, string, string) string { return "" }, ""},
		{"stale socket replaced", func(t *testing.T, dir, socket string) string {
			mkdir(t, dir, 0o700)
			l, err := net.Listen("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			l.Close()
			return ""
		}, ""},
		{"symlink replaced, not followed", func(t *testing.T, dir, socket string) string {
			mkdir(t, dir, 0o700)
			victim := filepath.Join(t.TempDir(), "victim")
			writeFile(t, victim)
			symlink(t, victim, socket)
			return victim
		}, ""},
		{"planted file replaced", func(t *testing.T, dir, socket string) string {
			mkdir(t, dir, 0o700)
			writeFile(t, socket)
			return ""
		}, ""},
		{"a directory in the way", func(t *testing.T, dir, socket string) string {
			mkdir(t, socket, 0o700)
			return ""
		}, "a directory is in the way"},
		{"group-writable directory", func(t *testing.T, dir, _ string) string {
			mkdir(t, dir, 0o770)
			return ""
		}, "not writable by group or others"},
		{"a symlink as the directory", func(t *testing.T, dir, _ string) string {
			mkdir(t, dir+".real", 0o700)
			symlink(t, dir+".real", dir)
			return ""
		}, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "root", "pods-api")
			socket := filepath.Join(dir, "pods-api.sock")
			victim := tt.prepare(t, dir, socket)
			l, err := Listen(socket, rootOnly)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Listen: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if info, err := os.Lstat(socket); err != nil || info.Mode().Type() != os.ModeSocket || info.Mode().Perm() != 0o600 {
				t.Errorf("socket: %v %v, want a socket of mode 0600", info.Mode(), err)
			}
			if info, err := os.Lstat(dir); err != nil || info.Mode().Perm() != 0o700 {
				t.Errorf("directory: %v %v, want 0700", info.Mode(), err)
			}
			if victim != "" {
				if info, err := os.Stat(victim); err != nil || info.Mode().Perm() != 0o644 {
					t.Errorf("the symlink's target: %v %v, want it untouched (0644)", info.Mode(), err)
				}
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("directory holds %v, want the socket only", entries)
			}
			c, err := net.Dial("unix", socket)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			c.Close()
		})
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}
