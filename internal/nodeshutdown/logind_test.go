package nodeshutdown

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"go.uber.org/goleak"
)

// privateBusConfig is a bus on a socket in dir on which every connection
// may own any name and call anything: the test stands in for the policy,
// berth's check must hold without it.
const privateBusConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
  </policy>
</busconfig>
`

// startBus runs a private dbus-daemon for the test and returns its
// address.
func startBus(t *testing.T) string {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Skip("dbus-daemon is not installed")
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(config, fmt.Appendf(nil, privateBusConfig, filepath.Join(dir, "bus")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemon, "--nofork", "--nosyslog", "--config-file="+config, "--print-address=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("dbus-daemon's log:\n%s", stderr.String())
		}
	})
	// The daemon prints its address once it listens.
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon's address: %v", err)
	}
	return strings.TrimSpace(addr)
}

// busConn is a connection to the private bus, closed with the test.
func busConn(t *testing.T, addr string) *dbus.Conn {
	t.Helper()
	c, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip waits for the bus's answer to a call from c: the bus has then
// routed every message c sent before it.
func roundTrip(t *testing.T, c *dbus.Conn) {
	t.Helper()
	if err := c.BusObject().Call("org.freedesktop.DBus.GetId", 0).Err; err != nil {
		t.Fatal(err)
	}
}

// sendSignal emits a signal from c, to everyone or, with dest, to that
// connection alone.
func sendSignal(t *testing.T, c *dbus.Conn, dest string, path dbus.ObjectPath, iface, member string, body ...any) {
	t.Helper()
	msg := &dbus.Message{Type: dbus.TypeSignal, Headers: map[dbus.HeaderField]dbus.Variant{
		dbus.FieldPath:      dbus.MakeVariant(path),
		dbus.FieldInterface: dbus.MakeVariant(iface),
		dbus.FieldMember:    dbus.MakeVariant(member),
		dbus.FieldSignature: dbus.MakeVariant(dbus.SignatureOf(body...)),
	}, Body: body}
	if dest != "" {
		msg.Headers[dbus.FieldDestination] = dbus.MakeVariant(dest)
	}
	if err := c.Send(msg, nil).Err; err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c)
}

// recordHandler keeps the messages and attributes of the records logged.
type recordHandler struct {
	mu    sync.Mutex
	lines []string
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, line)
	h.mu.Unlock()
	return nil
}

func (h *recordHandler) matching(s string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// logindStep is one thing a connection does on the bus: "own" and
// "release" logind's name, "emit" PrepareForShutdown(value) to everyone,
// "tell" it to berth alone, "forge" a NameOwnerChanged giving itself
// logind's name, sent to berth alone; "dial" (no connection) makes berth
// connect.
type logindStep struct {
	conn, do string
	value    bool
}

// TestLogindBelievesOnlyOwner runs berth's logind client on a private bus
// where any connection may emit logind's signals: only those of the
// connection owning org.freedesktop.login1 when they arrive may come out,
// in order, and each other sender is logged once. A value from the owner
// sent after the others is expected last, so anything else believed would
// come out first.
func TestLogindBelievesOnlyOwner(t *testing.T) {
	for _, tt := range []struct {
		name    string
		steps   []logindStep
		want    []bool
		refused []string // connections whose refusal is logged
	}{{
		// The match rule names logind: the bus does not even pass it on.
		name:  "a signal from another connection to everyone",
		steps: []logindStep{{conn: "logind", do: "own"}, {do: "dial"}, {conn: "nobody", do: "emit", value: true}, {conn: "logind", do: "emit"}},
		want:  []bool{false},
	}, {
		name: "signals from another connection to berth, logged once",
		steps: []logindStep{{conn: "logind", do: "own"}, {do: "dial"}, {conn: "nobody", do: "tell", value: true},
			{conn: "nobody", do: "tell", value: true}, {conn: "logind", do: "emit"}},
		want: []bool{false}, refused: []string{"nobody"},
	}, {
		name: "a forged NameOwnerChanged",
		steps: []logindStep{{conn: "logind", do: "own"}, {do: "dial"}, {conn: "nobody", do: "forge"},
			{conn: "nobody", do: "tell", value: true}, {conn: "logind", do: "emit"}},
		want: []bool{false}, refused: []string{"nobody"},
	}, {
		name: "logind starts after berth",
		steps: []logindStep{{do: "dial"}, {conn: "nobody", do: "emit", value: true}, {conn: "nobody", do: "tell", value: true},
			{conn: "logind", do: "own"}, {conn: "logind", do: "emit"}},
		want: []bool{false}, refused: []string{"nobody"},
	}, {
		name: "logind restarts: the old owner is no longer believed",
		steps: []logindStep{{conn: "logind", do: "own"}, {do: "dial"}, {conn: "logind", do: "emit", value: true},
			{conn: "logind", do: "release"}, {conn: "new-logind", do: "own"}, {conn: "logind", do: "tell", value: true},
			{conn: "new-logind", do: "emit"}},
		want: []bool{true, false}, refused: []string{"logind"},
	}, {
		name: "the owner's signals in order",
		steps: []logindStep{{conn: "logind", do: "own"}, {do: "dial"}, {conn: "logind", do: "emit", value: true},
			{conn: "logind", do: "emit"}, {conn: "logind", do: "tell", value: true}},
		want: []bool{true, false, true},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			// Registered first, so it runs after the connections close.
			ignore := goleak.IgnoreCurrent()
			t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
			addr := startBus(t)
			conns := map[string]*dbus.Conn{}
			conn := func(name string) *dbus.Conn {
				if conns[name] == nil {
					conns[name] = busConn(t, addr)
				}
				return conns[name]
			}
			logs := &recordHandler{}
			var l *dbusLogind
			for _, s := range tt.steps {
				c := conn(s.conn)
				switch s.do {
				case "dial":
					got, err := dialLogind(func(opts ...dbus.ConnOption) (*dbus.Conn, error) { return dbus.Connect(addr, opts...) }, slog.New(logs))
					if err != nil {
						t.Fatal(err)
					}
					l = got.(*dbusLogind)
					defer l.Close()
				case "own":
					if r, err := c.RequestName(logindService, dbus.NameFlagDoNotQueue); err != nil || r != dbus.RequestNameReplyPrimaryOwner {
						t.Fatalf("%s owns %s: %v, %v", s.conn, logindService, r, err)
					}
				case "release":
					if _, err := c.ReleaseName(logindService); err != nil {
						t.Fatal(err)
					}
				case "emit":
					sendSignal(t, c, "", logindPath, logindInterface, "PrepareForShutdown", s.value)
				case "tell":
					sendSignal(t, c, l.conn.Names()[0], logindPath, logindInterface, "PrepareForShutdown", s.value)
				case "forge":
					sendSignal(t, c, l.conn.Names()[0], busPath, busInterface, "NameOwnerChanged", logindService, conn("logind").Names()[0], c.Names()[0])
				}
			}
			for i, want := range tt.want {
				select {
				case got := <-l.PrepareForShutdown():
					if got != want {
						t.Fatalf("value %d = %v, want %v (all: %v)", i, got, want, tt.want)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("no value %d (want %v)", i, tt.want)
				}
			}
			refusals := logs.matching("ignoring PrepareForShutdown from non-owner")
			if len(refusals) != len(tt.refused) {
				t.Fatalf("refusals logged: %q, want one for each of %v", refusals, tt.refused)
			}
			for i, name := range tt.refused {
				if want := "sender=" + conns[name].Names()[0]; !strings.Contains(refusals[i], want) || !strings.HasPrefix(refusals[i], "WARN") {
					t.Errorf("refusal %q, want a warning with %s", refusals[i], want)
				}
			}
		})
	}
}

// TestLogindRefusalsLogBounded: a local user making connection after
// connection gets each logged once, up to a bound, then one notice.
func TestLogindRefusalsLogBounded(t *testing.T) {
	logs := &recordHandler{}
	l := &dbusLogind{log: slog.New(logs), wake: make(chan struct{}, 1), refused: map[string]bool{}, owner: ":1.1"}
	for i := range maxRefusedSenders + 10 {
		for range 2 {
			l.DeliverSignal(logindInterface, "PrepareForShutdown", &dbus.Signal{Sender: fmt.Sprintf(":1.%d", i+2), Path: logindPath,
				Name: logindInterface + ".PrepareForShutdown", Body: []any{true}})
		}
	}
	if got := len(logs.matching("ignoring PrepareForShutdown from non-owner")); got != maxRefusedSenders {
		t.Errorf("refusals logged = %d, want %d", got, maxRefusedSenders)
	}
	if got := len(logs.matching("ignored without a log")); got != 1 {
		t.Errorf("notices of unlogged refusals = %d, want 1", got)
	}
	if len(l.pending) != 0 {
		t.Errorf("believed %v", l.pending)
	}
}
