package apiclient

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTrustedPeer(t *testing.T) {
	tests := []struct {
		peer, euid int
		want       bool
	}{
		{0, 0, true},         // root's CLI, root's daemon
		{0, 1000, true},      // a socket-group member talking to root's daemon
		{1000, 1000, true},   // a berth of one's own (a test bed)
		{1000, 0, false},     // root's CLI lured to a user's socket
		{65534, 1000, false}, // someone else's
	}
	for _, tt := range tests {
		if got := trustedPeer(tt.peer, tt.euid); got != tt.want {
			t.Errorf("trustedPeer(%d, %d) = %v, want %v", tt.peer, tt.euid, got, tt.want)
		}
	}
}

// TestCheckPeerReadsTheKernelsRecord: over a real socket the listener's
// uid is the test's own, which is trusted, and a caller pretending to be
// another user does not trust it unless it is root.
func TestCheckPeerReadsTheKernelsRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	self := os.Geteuid()
	if err := checkPeer(c, self); err != nil {
		t.Errorf("own socket: %v", err)
	}
	err = checkPeer(c, self+1)
	if self == 0 && err != nil {
		t.Errorf("root's socket refused: %v", err)
	}
	if self != 0 && (err == nil || !strings.Contains(err.Error(), "not the berth daemon")) {
		t.Errorf("another user's socket: %v, want a refusal", err)
	}
}
