package agent

import (
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// listenNotify stands in for systemd's notification socket.
func listenNotify(t *testing.T) (*net.UnixConn, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, path
}

// received drains the datagrams sent so far.
func received(t *testing.T, conn *net.UnixConn) []string {
	t.Helper()
	var out []string
	buf := make([]byte, 4096)
	for {
		if err := conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Read(buf)
		if err != nil {
			return out
		}
		out = append(out, string(buf[:n]))
	}
}

func TestNotifier(t *testing.T) {
	tests := []struct {
		name         string
		watchdogUsec string
		want         []string
	}{
		{"no watchdog asked for", "", []string{"READY=1", "STATUS=2 pods running", "STOPPING=1"}},
		{"watchdog asked for", "30000000", []string{"READY=1", "STATUS=2 pods running", "WATCHDOG=1", "STOPPING=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, path := listenNotify(t)
			t.Setenv("NOTIFY_SOCKET", path)
			t.Setenv("WATCHDOG_USEC", tt.watchdogUsec)
			n := newNotifier(slog.New(slog.NewTextHandler(io.Discard, nil)))
			n.ready()
			n.status("2 pods running")
			n.status("2 pods running")
			n.watchdog()
			n.stopping()
			if got := received(t, conn); !slices.Equal(got, tt.want) {
				t.Errorf("sent %q, want %q (an unchanged STATUS is sent once)", got, tt.want)
			}
		})
	}
}
