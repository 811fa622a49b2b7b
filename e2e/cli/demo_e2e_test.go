//go:build e2e

package cli

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-agent/berth/e2e/testbed"
)

// TestDemo runs what `make demo` runs (examples/demo.sh) with a bed
// directory of its own: every example must reach the state examples/README.md
// promises (web servers answering, init containers done, env resolved, jobs
// completed or failed, the crash loop restarting), and Ctrl-C (SIGINT to the script's process group, as a terminal
// sends it) must stop berth and take the bed down.
func TestDemo(t *testing.T) {
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		t.Skip("no network namespaces")
	}
	lockDemoPort(t)
	bedDir, err := os.MkdirTemp("", "berth-demo-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(bedDir)
	cmd := exec.Command("sh", "examples/demo.sh")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "TESTBED_DIR="+bedDir, "BERTH="+berthBin, "BERTH_LISTEN="+testbed.FreeAddr(t))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	w := lockedWriter{mu: &sync.Mutex{}, w: &out}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited is closed once the demo has exited, with its error in exitErr.
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	defer func() {
		if t.Failed() {
			w.mu.Lock()
			t.Logf("demo output:\n%s", out.String())
			w.mu.Unlock()
		}
	}()
	interrupt := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	// However the test ends, the demo takes its bed down before the bed's
	// directory goes (the deferred RemoveAll above): a failure that
	// returned at once removed the testbed CLI and bed.json from under the
	// teardown, and the bed's containers, the web server on the host's
	// port 18080 among them, outlived the test and broke the next run.
	// stop sends Ctrl-C and waits for the demo to exit; it reports false
	// when the demo had to be killed after 2 minutes.
	stop := func() bool {
		interrupt()
		select {
		case <-exited:
			return true
		case <-time.After(2 * time.Minute):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			return false
		}
	}
	defer func() {
		select {
		case <-exited:
		default:
			if !stop() {
				t.Errorf("demo did not stop within 2m of Ctrl-C")
			}
		}
	}()

	d := &daemon{socket: filepath.Join(bedDir, "berth", "berth.sock")}
	host, _ := os.Hostname()
	node := strings.ToLower(host)
	// What each example must show, as examples/README.md promises.
	want := map[string]func(f []string) bool{
		"web-host":       running,
		"web-pod":        running,
		"init-demo":      running,
		"env-demo":       running,
		"resources-demo": running,
		"job-once":       status("Completed"),
		"job-retry":      func(f []string) bool { return status("Completed")(f) && f[3] == "2" },
		"job-fail":       status("Error"),
		"crashloop":      func(f []string) bool { return f[3] != "0" },
	}
	deadline := time.Now().Add(4 * time.Minute)
	for {
		select {
		case <-exited:
			t.Fatalf("demo exited early: %v", exitErr)
		default:
		}
		stdout, _, _ := berth(t, d, "pods")
		done := true
		for name, ok := range want {
			if f := row(stdout, name+"-"+node); len(f) < 6 || !ok(f) {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			interrupt()
			t.Fatalf("the examples did not reach their states within 4m; berth pods:\n%s", stdout)
		}
		time.Sleep(time.Second)
	}
	for url, body := range map[string]string{
		"http://127.0.0.1:18080/": "served on the host network",
		"http://127.0.0.1:18081/": "on the pod network",
	} {
		if got := httpGet(t, url); !strings.Contains(got, body) {
			t.Errorf("GET %s: %q, want %q", url, got, body)
		}
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"logs", "env-demo"}, []string{"POD_NAME=env-demo-" + node, "POD_NAMESPACE=default", "NODE_NAME=" + node, "MEMORY_LIMIT=32", "CPU_LIMIT=250", "GREETING=hello from a static pod"}},
		{[]string{"logs", "init-demo", "-c", "render"}, []string{"content prepared by an init container"}},
		{[]string{"logs", "job-retry"}, []string{"attempt 3"}},
		{[]string{"logs", "resources-demo"}, []string{"memory.max: 25165824"}},
		{[]string{"describe", "resources-demo"}, []string{"QoS Class:", "Guaranteed"}},
		{[]string{"describe", "init-demo"}, []string{"Conditions:", "Events:"}},
		{[]string{"events", "init-demo"}, []string{"Started", "pod/init-demo-" + node}},
	} {
		out, errb, code := berth(t, d, c.args...)
		for _, w := range c.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("berth %s: exit %d, stderr %q, want %q in:\n%s", strings.Join(c.args, " "), code, errb, w, out)
			}
		}
	}
	if !stop() {
		t.Fatal("demo did not stop within 2m of Ctrl-C")
	}
	if _, err := os.Stat(filepath.Join(bedDir, "bed.json")); !os.IsNotExist(err) {
		t.Errorf("the test bed is still there after Ctrl-C: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !strings.Contains(out.String(), "taking the test bed down") {
		t.Errorf("demo did not take the bed down")
	}
}

func running(f []string) bool { return f[1] == "1/1" && f[2] == "Running" }

func status(s string) func([]string) bool { return func(f []string) bool { return f[2] == s } }

func httpGet(t *testing.T, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// lockDemoPort holds, until the test ends, an exclusive lock that every
// test process on this machine takes before it runs the demo: the
// host-network example binds the host's port 18080, and `make e2e-all`
// runs each containerd version's suite side by side, so two demos at once
// left the second one's web server crash-looping on a taken port.
func lockDemoPort(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "berth-demo-port-18080.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("the demo's port lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("the demo's port lock: %v", err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
	// With the lock held no demo has the port, so a listener on it is
	// another program's, whose answers the test would take for the web
	// server's.
	l, err := net.Listen("tcp", ":18080")
	if err != nil {
		t.Fatalf("the host-network example needs port 18080, which another program holds: %v", err)
	}
	l.Close()
}
