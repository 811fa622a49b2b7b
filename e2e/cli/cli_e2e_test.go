//go:build e2e

// Package cli drives what an operator types, for real: `berth pods`,
// `berth logs -f` and `berth describe` against a running `berth run` on a
// private containerd, and `make demo`'s script on the examples.
//
// Run: go test -race -count=1 -tags e2e -timeout 20m ./e2e/cli/
package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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

const (
	nodeName    = "cli-node"
	waitTimeout = 90 * time.Second
)

var (
	// berthBin is the berth binary under test, built by TestMain (or
	// BERTH_E2E_BINARY).
	berthBin string
	// bed is the containerd of TestCLI; TestDemo brings up its own, as
	// `make demo` does.
	bed *testbed.Bed
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "berth-cli-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/cli:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if berthBin = os.Getenv("BERTH_E2E_BINARY"); berthBin == "" {
		berthBin = filepath.Join(tmp, "berth")
		cmd := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", berthBin, "./cmd/berth")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e/cli: build berth: %v\n%s", err, out)
			return 1
		}
	}
	if bed, err = testbed.Start(testbed.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "e2e/cli: start test bed:", err)
		return 1
	}
	defer func() {
		if err := bed.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e/cli: close test bed:", err)
		}
	}()
	return m.Run()
}

// daemon is one `berth run` of a test, with its own directories.
type daemon struct {
	dir, manifests, socket, addr string
	cmd                          *exec.Cmd
	args                         []string // of berth run, for restart
	log                          *bytes.Buffer
	mu                           *sync.Mutex
	// unpublish, when set, removes the pods of a source other than the
	// manifest directory.
	unpublish func()
}

// startDaemon starts berth on a manifest directory holding manifests, with
// extra flags. On cleanup the pods are removed (the manifests deleted, and
// d.unpublish called for other sources) before berth stops, so the shared
// bed is left clean.
func startDaemon(t *testing.T, manifests map[string]string, extra ...string) *daemon {
	t.Helper()
	return startDaemonDashes(t, "--", manifests, extra...)
}

// startDaemonDashes is startDaemon with its own flags given with dashes
// ("-" is the single-dash form older unit files use).
func startDaemonDashes(t *testing.T, dashes string, manifests map[string]string, extra ...string) *daemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "berth-cli-")
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{dir: dir, manifests: filepath.Join(dir, "manifests"), socket: filepath.Join(dir, "run", "berth.sock"), addr: testbed.FreeAddr(t),
		log: &bytes.Buffer{}, mu: &sync.Mutex{}}
	if err := os.MkdirAll(d.manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range manifests {
		d.write(t, name, content)
	}
	args := []string{"run"}
	for _, f := range [][2]string{{"pod-manifest-path", d.manifests}, {"container-runtime-endpoint", bed.Endpoint},
		{"root-dir", filepath.Join(dir, "root")}, {"pod-logs-dir", filepath.Join(dir, "pods")}, {"listen", d.addr},
		{"socket", d.socket}, {"hostname-override", nodeName}, {"crashloop-backoff-initial", "1s"},
		{"crashloop-backoff-max", "2s"}, {"log-level", "debug"}} {
		args = append(args, dashes+f[0], f[1])
	}
	d.args = append(args, extra...)
	d.start(t)
	t.Cleanup(func() {
		defer func() {
			d.cmd.Process.Signal(syscall.SIGTERM)
			d.cmd.Wait()
			if t.Failed() {
				d.mu.Lock()
				t.Logf("berth's log:\n%s", d.log.String())
				d.mu.Unlock()
			}
			os.RemoveAll(dir)
		}()
		// Remove every manifest first so berth stops the pods it runs, and
		// the shared bed is left clean for the next test.
		entries, _ := os.ReadDir(d.manifests)
		for _, e := range entries {
			os.Remove(filepath.Join(d.manifests, e.Name()))
		}
		if d.unpublish != nil {
			d.unpublish()
		}
		waitFor(t, "berth pods to list no pod after the manifests are gone", func() (bool, string) {
			out, _, _ := berth(t, d, "pods")
			return strings.TrimSpace(out) == "", out
		})
	})
	return d
}

// start runs berth with d's arguments.
func (d *daemon) start(t *testing.T) {
	t.Helper()
	d.cmd = exec.Command(berthBin, d.args...)
	w := lockedWriter{d.mu, d.log}
	d.cmd.Stdout, d.cmd.Stderr = w, w
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

// restart stops berth with SIGTERM, which leaves the pods running, and
// starts it again on the same directories.
func (d *daemon) restart(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("berth run after SIGTERM: %v", err)
	}
	d.start(t)
}

func (d *daemon) write(t *testing.T, name, content string) {
	t.Helper()
	tmp := filepath.Join(d.dir, "."+name)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.manifests, name)); err != nil {
		t.Fatal(err)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// berth runs one client command against d and returns stdout, stderr and
// the exit code.
func berth(t *testing.T, d *daemon, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, berthBin, args...)
	cmd.Env = append(os.Environ(), "BERTH_SOCKET="+d.socket)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("berth %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), code
}

// row finds the `berth pods` row of pod name and returns its columns.
func row(out, name string) []string {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == name {
			return f
		}
	}
	return nil
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last seen:\n%s", what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

const tickerPod = `apiVersion: v1
kind: Pod
metadata:
  name: ticker
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: tick
    image: busybox:1.36
    command: ["sh", "-c", "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done"]
`

const crashPod = `apiVersion: v1
kind: Pod
metadata:
  name: crasher
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", "echo run at $(date +%s%N); echo failing >&2; exit 3"]
`

const badPod = `apiVersion: v1
kind: Pod
metadata:
  name: broken
spec:
  containers:
  - name: app
`

// TestCLI drives berth pods, logs (-f, --tail, --previous) and describe
// against a real berth and containerd.
func TestCLI(t *testing.T) {
	d := startDaemon(t, map[string]string{"ticker.yaml": tickerPod, "crasher.yaml": crashPod, "broken.yaml": badPod,
		"mangled.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n"})

	waitFor(t, "ticker Running 1/1, crasher crash-looping, broken Invalid", func() (bool, string) {
		out, errb, _ := berth(t, d, "pods")
		tick, crash, bad := row(out, "ticker-"+nodeName), row(out, "crasher-"+nodeName), row(out, "broken-"+nodeName)
		ok := len(tick) >= 6 && tick[1] == "1/1" && tick[2] == "Running" && tick[len(tick)-1] == "file" &&
			len(crash) >= 6 && (crash[2] == "CrashLoopBackOff" || crash[2] == "Error") && crash[3] != "0" &&
			len(bad) >= 6 && bad[2] == "Invalid"
		return ok, out + errb
	})
	// The manifest too broken to name its pod has no row: it is a
	// warning on stderr.
	if _, errb, _ := berth(t, d, "pods"); !strings.Contains(errb, "Warning: manifest problem: "+filepath.Join(d.manifests, "mangled.yaml")+":") {
		t.Errorf("berth pods does not list the mangled manifest's problem; stderr:\n%s", errb)
	}
	out, _, _ := berth(t, d, "ps", "-o", "wide")
	if f := row(out, "ticker-"+nodeName); len(f) != 9 || net.ParseIP(f[6]) == nil || f[7] != nodeName || f[8] != filepath.Join(d.manifests, "ticker.yaml") {
		t.Errorf("berth ps -o wide row of ticker: %q", f)
	}
	if out, _, code := berth(t, d, "pods", "ticker", "-o", "json"); code != 0 || !strings.Contains(out, `"kind": "Pod"`) || !strings.Contains(out, `"phase": "Running"`) {
		t.Errorf("berth pods ticker -o json: exit %d\n%s", code, out)
	}

	t.Run("completion", func(t *testing.T) {
		// The shells' scripts call __complete: pod names from the daemon,
		// then the containers of the pod named, never file names (:4).
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"__complete", "logs", "tick"}, "ticker-" + nodeName + "\n:4\n"},
			{[]string{"__complete", "logs", "ticker", "-c", ""}, "tick\n:4\n"},
			{[]string{"__complete", "describe", "-n", "kube-system", "tick"}, ":4\n"},
		} {
			if out, errb, code := berth(t, d, tt.args...); code != 0 || out != tt.want {
				t.Errorf("berth %s: exit %d, stdout %q, want %q (stderr %q)", strings.Join(tt.args, " "), code, out, tt.want, errb)
			}
		}
		if out, errb, code := berth(t, d, "describe", "pod", "ticker"); code != 0 || !strings.Contains(out, "Name:         ticker-"+nodeName) {
			t.Errorf("berth describe pod ticker: exit %d, stderr %q\n%s", code, errb, out)
		}
	})

	t.Run("logs tail", func(t *testing.T) {
		waitFor(t, "three lines of ticker's log", func() (bool, string) {
			out, errb, code := berth(t, d, "logs", "ticker", "--tail", "3")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			return code == 0 && len(lines) == 3 && strings.HasPrefix(lines[2], "tick "), out + errb
		})
		out, _, _ := berth(t, d, "logs", "ticker", "--tail", "1", "--timestamps")
		ts, msg, _ := strings.Cut(strings.TrimSpace(out), " ")
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || !strings.HasPrefix(msg, "tick ") {
			t.Errorf("--timestamps line %q: %v", out, err)
		}
	})

	t.Run("logs follow", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, berthBin, "logs", "-f", "ticker", "--tail", "1")
		cmd.Env = append(os.Environ(), "BERTH_SOCKET="+d.socket)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		var seen []int
		for len(seen) < 6 && lines.Scan() {
			var n int
			if _, err := fmt.Sscanf(lines.Text(), "tick %d", &n); err != nil {
				t.Fatalf("unexpected line %q", lines.Text())
			}
			seen = append(seen, n)
		}
		for i := 1; i < len(seen); i++ {
			if seen[i] != seen[i-1]+1 {
				t.Errorf("followed lines not consecutive: %v", seen)
			}
		}
		if len(seen) < 6 {
			t.Fatalf("got %v before the stream ended (stderr %q)", seen, errb.String())
		}
		// Removing the manifest stops the container: the follow ends by
		// itself, with exit code 0.
		os.Remove(filepath.Join(d.manifests, "ticker.yaml"))
		for lines.Scan() {
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("berth logs -f after the pod was removed: %v (stderr %q)", err, errb.String())
		}
	})

	t.Run("logs previous and describe of a crash loop", func(t *testing.T) {
		waitFor(t, "a previous run of crasher", func() (bool, string) {
			out, errb, code := berth(t, d, "logs", "crasher", "--previous")
			return code == 0 && strings.Contains(out, "run at ") && strings.Contains(out, "failing"), out + errb
		})
		out, errb, code := berth(t, d, "describe", "crasher")
		for _, want := range []string{"Name:         crasher-" + nodeName, "Last State:     Terminated", "Exit Code:    3", "Restart Count:", "Started", "BackOff"} {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("berth describe crasher lacks %q (exit %d, stderr %q):\n%s", want, code, errb, out)
			}
		}
		out, _, code = berth(t, d, "describe", "broken")
		if code != 0 || !strings.Contains(out, "Reason:       Invalid") || !strings.Contains(out, "broken.yaml:") {
			t.Errorf("berth describe broken (exit %d):\n%s", code, out)
		}
		_, errb, code = berth(t, d, "logs", "broken")
		if code != 1 || !strings.Contains(errb, "has no containers") {
			t.Errorf("berth logs broken: exit %d, stderr %q", code, errb)
		}
	})

	t.Run("logs only over the socket", func(t *testing.T) {
		resp, err := http.Get("http://" + d.addr + "/pods/default/crasher-" + nodeName + "/log")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("log over TCP: %d, want 403", resp.StatusCode)
		}
		info, err := os.Stat(d.socket)
		if err != nil || info.Mode().Perm() != 0o660 {
			t.Errorf("socket %s: %v, mode %v, want 0660", d.socket, err, info.Mode())
		}
	})
}

// TestRunOneDashFlags: a unit file or script written for Go's flag
// package (-pod-manifest-path) still starts berth, which warns once.
func TestRunOneDashFlags(t *testing.T) {
	d := startDaemonDashes(t, "-", map[string]string{"ticker.yaml": tickerPod})
	waitFor(t, "ticker Running", func() (bool, string) {
		out, errb, _ := berth(t, d, "pods")
		f := row(out, "ticker-"+nodeName)
		return len(f) >= 3 && f[2] == "Running", out + errb
	})
	d.mu.Lock()
	log := d.log.String()
	d.mu.Unlock()
	if n := strings.Count(log, "flags with one dash are deprecated"); n != 1 || !strings.Contains(log, "give them two: --pod-manifest-path, --container-runtime-endpoint") {
		t.Errorf("berth's log has %d deprecation warnings, want one naming the flags:\n%s", n, log)
	}
}

// TestDaemonNotRunning checks the message when nothing listens.
func TestDaemonNotRunning(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "berth.sock")
	cmd := exec.Command(berthBin, "pods", "--socket", sock)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "no socket there: is berth running?") {
		t.Errorf("berth pods without a daemon: %v\n%s", err, out)
	}
}

// TestHTTPSourceExample serves examples/http/pods.yaml over HTTP, as the
// examples' README shows with python3 -m http.server, and checks berth runs
// its pod from the URL.
func TestHTTPSourceExample(t *testing.T) {
	example, err := os.ReadFile("../../examples/http/pods.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	body := example
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Write(body)
	}))
	t.Cleanup(srv.Close) // after the daemon's cleanup, which needs it
	d := startDaemon(t, nil, "--manifest-url", srv.URL+"/pods.yaml", "--http-check-frequency", "1s")
	d.unpublish = func() {
		mu.Lock()
		body = []byte("apiVersion: v1\nkind: PodList\nitems: []\n")
		mu.Unlock()
	}
	waitFor(t, "from-http Running from the http source", func() (bool, string) {
		out, errb, _ := berth(t, d, "pods")
		f := row(out, "from-http-"+nodeName)
		return len(f) == 6 && f[1] == "1/1" && f[2] == "Running" && f[5] == "http", out + errb
	})
	waitFor(t, "a tick in from-http's log", func() (bool, string) {
		out, errb, _ := berth(t, d, "logs", "from-http")
		return strings.HasPrefix(out, "tick "), out + errb
	})
}
