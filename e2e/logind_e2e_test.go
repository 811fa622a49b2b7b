//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// spooferEnv, when set (to "ADDRESS DESTINATION"), makes the test binary
// the local user of TestShutdownSignalOnlyFromLogind who forges logind's
// signal, instead of running tests (see TestMain).
const spooferEnv = "BERTH_E2E_LOGIND_SPOOFER"

const (
	logindName  = "org.freedesktop.login1"
	logindPath  = dbus.ObjectPath("/org/freedesktop/login1")
	logindIface = "org.freedesktop.login1.Manager"
)

// systemBusConfig is a private system bus with the default policy of
// /usr/share/dbus-1/system.conf (everybody may connect and send signals,
// nobody may own names or call methods but the bus's) and the part of
// systemd's org.freedesktop.login1.conf berth needs: root owns logind's
// name and may call it, anybody may read its properties and call Inhibit.
const systemBusConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
    <deny send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus" send_member="UpdateActivationEnvironment"/>
  </policy>
  <policy user="root">
    <allow own="org.freedesktop.login1"/>
    <allow send_destination="org.freedesktop.login1"/>
    <allow receive_sender="org.freedesktop.login1"/>
  </policy>
  <policy context="default">
    <deny send_destination="org.freedesktop.login1"/>
    <allow send_destination="org.freedesktop.login1" send_interface="org.freedesktop.DBus.Properties" send_member="Get"/>
    <allow send_destination="org.freedesktop.login1" send_interface="org.freedesktop.login1.Manager" send_member="Inhibit"/>
  </policy>
</busconfig>
`

// startSystemBus runs a dbus-daemon with systemBusConfig, its socket in
// dir, and returns its address.
func startSystemBus(t *testing.T, dir string) string {
	t.Helper()
	config := filepath.Join(dir, "system.conf")
	if err := os.WriteFile(config, fmt.Appendf(nil, systemBusConfig, filepath.Join(dir, "system_bus_socket")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("dbus-daemon", "--nofork", "--nosyslog", "--config-file="+config, "--print-address=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dbus-daemon: %v", err)
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

// logindStandIn is systemd-logind as berth uses it: Inhibit hands out the
// writing end of a pipe as the lock (its reading end sees EOF once berth
// releases it), InhibitDelayMaxUSec, and PrepareForShutdown.
type logindStandIn struct {
	conn     *dbus.Conn
	maxDelay time.Duration

	mu     sync.Mutex
	caller string     // unique name of Inhibit's last caller
	locks  []*os.File // reading ends
	given  []*os.File // writing ends handed out, still open here
}

func (l *logindStandIn) Inhibit(sender dbus.Sender, what, who, why, mode string) (dbus.UnixFD, *dbus.Error) {
	if what != "shutdown" || mode != "delay" {
		return 0, dbus.MakeFailedError(fmt.Errorf("unexpected lock %q %q", what, mode))
	}
	r, w, err := os.Pipe()
	if err != nil {
		return 0, dbus.MakeFailedError(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.caller = string(sender)
	l.locks = append(l.locks, r)
	l.given = append(l.given, w)
	return dbus.UnixFD(w.Fd()), nil
}

// logindProperties is org.freedesktop.DBus.Properties of the stand-in.
type logindProperties struct{ l *logindStandIn }

func (p logindProperties) Get(iface, name string) (dbus.Variant, *dbus.Error) {
	if iface == logindIface && name == "InhibitDelayMaxUSec" {
		return dbus.MakeVariant(uint64(p.l.maxDelay / time.Microsecond)), nil
	}
	return dbus.Variant{}, dbus.NewError("org.freedesktop.DBus.Error.UnknownProperty", []any{iface + "." + name})
}

// startLogindStandIn connects to the bus as root and owns logind's name.
func startLogindStandIn(t *testing.T, addr string, maxDelay time.Duration) *logindStandIn {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &logindStandIn{conn: conn, maxDelay: maxDelay}
	t.Cleanup(func() {
		conn.Close()
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, f := range append(l.locks, l.given...) {
			f.Close()
		}
	})
	if err := conn.Export(l, logindPath, logindIface); err != nil {
		t.Fatal(err)
	}
	if err := conn.Export(logindProperties{l}, logindPath, "org.freedesktop.DBus.Properties"); err != nil {
		t.Fatal(err)
	}
	if r, err := conn.RequestName(logindName, dbus.NameFlagDoNotQueue); err != nil || r != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("the stand-in owns %s: %v, %v", logindName, r, err)
	}
	return l
}

// takeLock returns the reading end of the one lock handed out and its
// holder's unique name, and closes the stand-in's copy of the writing
// end: call it once the holder has the lock.
func (l *logindStandIn) takeLock(t *testing.T) (*os.File, string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.locks) != 1 {
		t.Fatalf("locks handed out: %d, want 1", len(l.locks))
	}
	for _, w := range l.given {
		w.Close()
	}
	l.given = nil
	return l.locks[0], l.caller
}

func (l *logindStandIn) emit(t *testing.T, starting bool) {
	t.Helper()
	if err := l.conn.Emit(logindPath, logindIface+".PrepareForShutdown", starting); err != nil {
		t.Fatal(err)
	}
}

// released reports whether the lock's holder closed it: its reading end
// is at EOF.
func released(lock *os.File) (bool, string) {
	fds := []unix.PollFd{{Fd: int32(lock.Fd()), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	if err != nil {
		return false, err.Error()
	}
	return n == 1 && fds[0].Revents&unix.POLLHUP != 0, fmt.Sprintf("poll: %d, revents %#x", n, fds[0].Revents)
}

// TestShutdownSignalOnlyFromLogind runs berth with graceful node shutdown
// against a private system bus with the system bus's default policy and a
// stand-in logind owning org.freedesktop.login1. User nobody forges
// PrepareForShutdown(true), to everyone and to berth alone, after a forged
// NameOwnerChanged: berth logs the refusal and nothing changes (the pod
// runs, the lock is held). Then logind's own signal makes berth stop the
// pod and release the lock.
func TestShutdownSignalOnlyFromLogind(t *testing.T) {
	// nobody needs the bus's socket and a copy of this test binary.
	dir, err := os.MkdirTemp("", "berth-e2e-logind-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	addr := startSystemBus(t, dir)
	// logind waits longer than berth asks: berth leaves the machine's
	// logind.conf.d alone.
	li := startLogindStandIn(t, addr, time.Minute)
	b := newBerth(t, berthOptions{
		args:      []string{"--shutdown-grace-period", "30s"},
		env:       []string{"DBUS_SYSTEM_BUS_ADDRESS=" + addr},
		manifests: map[string]string{"victim.yaml": podManifest(sleeper("victim"))},
	})
	name := podName("victim")
	pod := b.waitRunning(name)
	before := b.waitRuntime(name, "main", pod.UID)
	b.waitFor("berth's logind delay lock", waitTimeout, func() (bool, string) {
		return b.logContains("graceful node shutdown: holding a logind delay lock"), "not logged"
	})
	lock, holder := li.takeLock(t)

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "spoofer")
	copyFile(t, self, bin, 0o755)
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), spooferEnv+"="+addr+" "+holder)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	t.Logf("spoofer as nobody:\n%s", out)
	if err != nil {
		t.Fatalf("spoofer: %v", err)
	}
	report := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, "\t")
		report[k] = v
	}
	if !strings.HasPrefix(report["own"], "org.freedesktop.DBus.Error.AccessDenied:") {
		t.Errorf("nobody asking for %s got %q, want AccessDenied", logindName, report["own"])
	}
	spoofer := report["name"]
	if !strings.HasPrefix(spoofer, ":") || report["sent"] != "ok" {
		t.Fatalf("spoofer's report %v", report)
	}
	// Its signal to berth alone came after the one to everyone: once the
	// refusal of the first is logged, berth has had the second, if the bus
	// passed it on at all.
	refusal := `level=WARN msg="ignoring PrepareForShutdown from non-owner" sender=` + spoofer + " "
	b.waitFor("berth's warning about "+spoofer, waitTimeout, func() (bool, string) {
		return b.logContains(refusal), "not logged"
	})
	// logind's own cancel comes after the forged signals, and berth
	// handles signals in order: once it is logged, berth has acted on any
	// forged signal it believed.
	li.emit(t, false)
	b.waitFor("berth's log of logind's cancel", waitTimeout, func() (bool, string) {
		return b.logContains("node shutdown: logind cancelled the shutdown"), "not logged"
	})
	if b.logContains("node shutdown: stopping pods") {
		t.Fatal("berth began a node shutdown on forged signals")
	}
	if now, ok, detail := runtimeState(name, "main", pod.UID); !ok || now.container.Id != before.container.Id {
		t.Fatalf("after the forged signals CRI shows %s, want container %s still running", detail, shortID(before.container.Id))
	}
	if gone, detail := released(lock); gone {
		t.Fatalf("berth released logind's lock on forged signals (%s)", detail)
	}

	li.emit(t, true)
	b.waitFor("berth to release logind's lock", waitTimeout, func() (bool, string) { return released(lock) })
	// berth releases the lock only once its pods are stopped.
	cs, err := containersOf(name)
	if err != nil {
		t.Fatal(err)
	}
	if running := runningContainers(cs); len(running) != 0 {
		t.Errorf("lock released with %d containers of %s still running", len(running), name)
	}
	if !b.logContains("node shutdown: pods stopped, releasing the logind lock") {
		t.Error("berth's log lacks the release of the lock")
	}
	b.waitPod(name, "not running", func(p *v1.Pod) bool { return p.Status.Phase != v1.PodRunning || !podReady(p) })
}

// spoof is the local user nobody of TestShutdownSignalOnlyFromLogind: it
// connects to the bus at addr, tries to own logind's name, then sends
// PrepareForShutdown(true) to everyone, a NameOwnerChanged giving itself
// logind's name to dest, and PrepareForShutdown(true) to dest, in that
// order on one connection. It reports NAME<tab>VALUE lines.
func spoof(addr, dest string) int {
	conn, err := dbus.Connect(addr)
	if err != nil {
		fmt.Printf("connect\t%v\n", err)
		return 1
	}
	defer conn.Close()
	self := conn.Names()[0]
	fmt.Printf("name\t%s\n", self)
	var derr dbus.Error
	if r, err := conn.RequestName(logindName, dbus.NameFlagDoNotQueue); errors.As(err, &derr) {
		fmt.Printf("own\t%s: %v\n", derr.Name, err)
	} else if err != nil {
		fmt.Printf("own\t%v\n", err)
	} else {
		fmt.Printf("own\treply %v\n", r)
	}
	signal := func(dest string, path dbus.ObjectPath, iface, member string, body ...any) error {
		msg := &dbus.Message{Type: dbus.TypeSignal, Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldPath:      dbus.MakeVariant(path),
			dbus.FieldInterface: dbus.MakeVariant(iface),
			dbus.FieldMember:    dbus.MakeVariant(member),
			dbus.FieldSignature: dbus.MakeVariant(dbus.SignatureOf(body...)),
		}, Body: body}
		if dest != "" {
			msg.Headers[dbus.FieldDestination] = dbus.MakeVariant(dest)
		}
		return conn.Send(msg, nil).Err
	}
	for _, err := range []error{
		signal("", logindPath, logindIface, "PrepareForShutdown", true),
		signal(dest, "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged", logindName, "", self),
		signal(dest, logindPath, logindIface, "PrepareForShutdown", true),
		// The bus answers once it has routed the signals before.
		conn.BusObject().Call("org.freedesktop.DBus.GetId", 0).Err,
	} {
		if err != nil {
			fmt.Printf("sent\t%v\n", err)
			return 1
		}
	}
	fmt.Printf("sent\tok\n")
	return 0
}
