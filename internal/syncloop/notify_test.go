package syncloop

import (
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podtest"
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

// TestStatusFollowsPhasesWithoutHousekeeping: STATUS= follows a pod's
// phase as soon as its worker records it; the fake clock never moves, so
// no housekeeping tick can be what sent it.
func TestStatusFollowsPhasesWithoutHousekeeping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn, path := listenNotify(t)
		t.Setenv("NOTIFY_SOCKET", path)
		h := newHarness(t, harnessOpts{})
		p := podtest.Simple(t, "web", podtest.Loop)
		h.apply(podspec.SourceFile, p)
		var seen []string
		buf := make([]byte, 4096)
		deadline := time.Now().Add(20 * time.Second)
		for !slices.Contains(seen, "STATUS=1 pods running, 0 pending, 0 failed") {
			if time.Now().After(deadline) {
				t.Fatalf("no STATUS= with the pod running; got %q", seen)
			}
			if err := conn.SetReadDeadline(deadline); err != nil {
				t.Fatal(err)
			}
			n, err := conn.Read(buf)
			if err != nil {
				t.Fatalf("read notifications: %v; got %q", err, seen)
			}
			seen = append(seen, string(buf[:n]))
		}
		if got := h.passes("housekeeping"); got != 0 {
			t.Errorf("%d housekeeping passes ran on a clock that never moved", got)
		}
	})
}
