//go:build e2e

package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSocketGroup: with --socket-group, a member of the group runs
// `berth pods` without root, and a user outside it is refused by the
// socket's mode. nobody (65534) is the member through its primary group
// nogroup; uid 65533 with gid 65533 belongs to no group of the machine.
func TestSocketGroup(t *testing.T) {
	const group = 65534
	d := startDaemon(t, map[string]string{"ticker.yaml": tickerPod}, "--socket-group", "nogroup")
	waitFor(t, "the socket", func() (bool, string) {
		_, err := os.Stat(d.socket)
		return err == nil, ""
	})
	// The test's own directory is root's 0700; let others reach the
	// directory berth made for its socket, as /run is reachable.
	if err := os.Chmod(d.dir, 0o711); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{d.socket, 0o660}, {filepath.Dir(d.socket), 0o750}} {
		info, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		st := info.Sys().(*syscall.Stat_t)
		if info.Mode().Perm() != c.mode || st.Uid != 0 || st.Gid != group {
			t.Errorf("%s: mode %v uid %d gid %d, want %v root:%d", c.path, info.Mode().Perm(), st.Uid, st.Gid, c.mode, group)
		}
	}
	// The binary under test may sit where nobody cannot read it (a clone
	// under /root): run a copy from the test's directory.
	bin := filepath.Join(d.dir, "berth")
	data, err := os.ReadFile(berthBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	as := func(uid, gid uint32) (string, string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "pods", "--socket", d.socket)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return out.String(), errb.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatalf("berth pods as %d: %v", uid, err)
		}
		return out.String(), errb.String(), 0
	}
	waitFor(t, "a member of the socket's group to list ticker", func() (bool, string) {
		out, errb, code := as(65534, group)
		return code == 0 && strings.Contains(out, "ticker-"+nodeName), out + errb
	})
	if out, errb, code := as(65533, 65533); code != 1 || !strings.Contains(errb, "permission denied") {
		t.Errorf("a user outside the group: exit %d, stdout %q, stderr %q; want exit 1 and permission denied", code, out, errb)
	}
}
