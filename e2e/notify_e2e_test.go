//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSdNotify runs berth as systemd would run a Type=notify unit with
// WatchdogSec: a unixgram NOTIFY_SOCKET of the test receives READY=1 once
// /readyz says ready (and the pod is known), a STATUS= summary, WATCHDOG=1
// pings, and STOPPING=1 on SIGTERM; berth exits 0 and its pod keeps
// running.
func TestSdNotify(t *testing.T) {
	dir, err := os.MkdirTemp("", "berth-e2e-notify-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })

	b := newBerth(t, berthOptions{
		env:       []string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=4000000"},
		manifests: map[string]string{"notified.yaml": podManifest(sleeper("notified"))},
		noStart:   true,
	})
	n := &notifyLog{b: b, pod: podName("notified")}
	go n.read(conn)
	started := time.Now()
	b.start()

	waitCond(t, "READY=1, STATUS= and WATCHDOG=1 on NOTIFY_SOCKET", waitTimeout, func() (bool, string) {
		return n.has("READY=1") && n.has("STATUS=") && n.has("WATCHDOG=1"), n.String()
	})
	t.Logf("READY=1 %s after start; messages: %s", n.first("READY=1").Sub(started).Round(time.Millisecond), n)
	n.mu.Lock()
	readyz, podKnown := n.readyzAtReady, n.podAtReady
	n.mu.Unlock()
	if readyz != http.StatusOK {
		t.Errorf("/readyz answered %d right after READY=1, want 200: READY=1 came before berth was ready", readyz)
	}
	if !podKnown {
		t.Errorf("/pods did not list %s right after READY=1: berth said ready while a pod of its manifests was missing from /pods", n.pod)
	}
	for _, m := range n.all("STATUS=") {
		if strings.TrimSpace(strings.TrimPrefix(m, "STATUS=")) == "" {
			t.Errorf("an empty STATUS= line")
		}
	}
	if n.first("WATCHDOG=1").Before(n.first("READY=1")) {
		t.Logf("note: WATCHDOG=1 came before READY=1")
	}

	rp := b.waitRuntime(podName("notified"), "main", "")
	st := b.stop()
	if st == nil || !st.Exited() || st.ExitCode() != 0 {
		t.Errorf("berth's exit on SIGTERM: %v, want exit status 0", st)
	}
	waitCond(t, "STOPPING=1 on NOTIFY_SOCKET", 10*time.Second, func() (bool, string) {
		return n.has("STOPPING=1"), n.String()
	})
	if n.first("STOPPING=1").Before(n.first("READY=1")) {
		t.Errorf("STOPPING=1 before READY=1: %s", n)
	}
	if n.count("READY=1") != 1 {
		t.Errorf("READY=1 sent %d times, want once: %s", n.count("READY=1"), n)
	}

	// Stopping berth leaves the pod running.
	time.Sleep(2 * time.Second)
	now, ok, detail := runtimeState(podName("notified"), "main", "")
	if !ok || now.container.Id != rp.container.Id {
		t.Errorf("after SIGTERM the pod is not left running as it was: %s (container %s, was %s)", detail, shortID(now.container.GetId()), shortID(rp.container.Id))
	}
}

// notifyLog collects sd_notify messages, one per line of each datagram.
type notifyLog struct {
	b   *berth
	pod string

	mu            sync.Mutex
	msgs          []notifyMsg
	readyzAtReady int  // /readyz status fetched as soon as READY=1 arrived
	podAtReady    bool // whether /pods listed pod then
}

type notifyMsg struct {
	at   time.Time
	text string
}

func (n *notifyLog) read(conn *net.UnixConn) {
	buf := make([]byte, 64<<10)
	for {
		k, _, err := conn.ReadFromUnix(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				fmt.Fprintln(os.Stderr, "notify socket:", err)
			}
			return
		}
		now := time.Now()
		for _, line := range strings.Split(strings.TrimSpace(string(buf[:k])), "\n") {
			first := line == "READY=1" && !n.has("READY=1")
			n.mu.Lock()
			n.msgs = append(n.msgs, notifyMsg{at: now, text: line})
			n.mu.Unlock()
			if first {
				code, _ := n.b.status("/readyz")
				p, _ := n.b.apiPod(n.pod)
				n.mu.Lock()
				n.readyzAtReady, n.podAtReady = code, p != nil
				n.mu.Unlock()
			}
		}
	}
}

// all returns the messages starting with prefix.
func (n *notifyLog) all(prefix string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, m := range n.msgs {
		if strings.HasPrefix(m.text, prefix) {
			out = append(out, m.text)
		}
	}
	return out
}

func (n *notifyLog) has(prefix string) bool  { return len(n.all(prefix)) > 0 }
func (n *notifyLog) count(prefix string) int { return len(n.all(prefix)) }

// first is when the first message starting with prefix arrived.
func (n *notifyLog) first(prefix string) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range n.msgs {
		if strings.HasPrefix(m.text, prefix) {
			return m.at
		}
	}
	return time.Time{}
}

func (n *notifyLog) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var parts []string
	for _, m := range n.msgs {
		parts = append(parts, fmt.Sprintf("%q", m.text))
	}
	return strings.Join(parts, " ")
}
