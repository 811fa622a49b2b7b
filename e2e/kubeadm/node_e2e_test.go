//go:build e2e

package kubeadm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/e2e/testbed"
)

// pollEvery is how often a wait looks again.
const pollEvery = 250 * time.Millisecond

// waitFor polls cond until it holds, for at most timeout (a failure
// deadline, generous for a loaded machine), and returns how long it took;
// it fails t with cond's last detail when time runs out.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) time.Duration {
	t.Helper()
	started := time.Now()
	for {
		ok, detail := cond()
		if ok {
			t.Logf("%s after %s", what, time.Since(started).Round(time.Millisecond))
			return time.Since(started)
		}
		if time.Since(started) > timeout {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, detail)
		}
		time.Sleep(pollEvery)
	}
}

// node is one berth process (and its restarts) acting as a cluster node's
// kubelet, on its own bed, with its own directories and local API.
type node struct {
	name      string
	bed       *testbed.Bed
	dir       string
	manifests string // --pod-manifest-path
	addr      string // --listen
	socket    string // --socket
	logFile   string
	args      []string
	unixHTTP  *http.Client

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// newNode prepares a berth for node name on b, in dir, with manifests
// from manifestDir and extra args; start runs it.
func newNode(t *testing.T, dir, name string, b *testbed.Bed, manifestDir string, args ...string) *node {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := &node{
		name: name, bed: b, dir: dir, manifests: manifestDir,
		addr: testbed.FreeAddr(t), socket: filepath.Join(dir, "berth.sock"), logFile: filepath.Join(dir, "berth.log"),
	}
	n.unixHTTP = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", n.socket)
		},
	}}
	n.args = append([]string{"run",
		"--pod-manifest-path", manifestDir,
		"--container-runtime-endpoint", b.Endpoint,
		"--root-dir", filepath.Join(dir, "root"),
		"--pod-logs-dir", filepath.Join(dir, "pods"),
		"--listen", n.addr,
		"--socket", n.socket,
		"--hostname-override", name,
		"--log-level", "debug",
	}, args...)
	return n
}

// start runs berth; its output goes to the log file.
func (n *node) start(t *testing.T) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	logf, err := os.OpenFile(n.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(logf, "=== e2e: starting %s %s\n", berthBin, strings.Join(n.args, " "))
	cmd := exec.Command(berthBin, n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start berth of %s: %v", n.name, err)
	}
	exited := make(chan struct{})
	n.cmd, n.exited = cmd, exited
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
}

// signal sends sig to berth and waits for it to exit.
func (n *node) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-exited
		t.Errorf("berth of %s did not exit within a minute of %s", n.name, sig)
	}
}

// stop ends berth with SIGTERM, which leaves the pods running.
func (n *node) stop(t *testing.T) { n.signal(t, syscall.SIGTERM) }

// alive reports whether berth runs; it fails t when berth exited.
func (n *node) alive(t *testing.T) {
	t.Helper()
	select {
	case <-n.exited:
		t.Fatalf("berth of %s exited: %v\n%s", n.name, n.cmd.ProcessState, n.logTail())
	default:
	}
}

// logTail is the end of berth's log, for a failure.
func (n *node) logTail() string {
	b, _ := os.ReadFile(n.logFile)
	if len(b) > 16<<10 {
		b = b[len(b)-16<<10:]
	}
	return fmt.Sprintf("--- berth of %s (log tail)\n%s", n.name, b)
}

// podLogTail is the last max lines naming match (all lines when match is
// empty) of the logs of a container of a pod in namespace kube-system
// that n runs, for a failed test's report.
func (n *node) podLogTail(pod, container, match string, max int) string {
	files, _ := filepath.Glob(filepath.Join(n.dir, "pods", "kube-system_"+pod+"-"+n.name+"_*", container, "*.log"))
	var lines []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, match) {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) > max {
		lines = lines[len(lines)-max:]
	}
	return fmt.Sprintf("--- %s/%s of %s (log lines naming %q, %d files)\n%s", pod, container, n.name, match, len(files), strings.Join(lines, "\n"))
}

// localPods is berth's /pods: the pods it runs with their statuses.
func (n *node) localPods() ([]v1.Pod, error) {
	resp, err := n.unixHTTP.Get("http://berth/pods")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /pods: %s %s", resp.Status, body)
	}
	var list v1.PodList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET /pods: %w", err)
	}
	return list.Items, nil
}

// metric returns the value of the series named exactly series (with its
// labels) from berth's /metrics, and false when it is absent.
func (n *node) metric(series string) (float64, bool) {
	resp, err := http.Get("http://" + n.addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && name == series {
			v, err := strconv.ParseFloat(value, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// ready reports whether berth's /readyz answers 200.
func (n *node) ready() (bool, string) {
	resp, err := http.Get("http://" + n.addr + "/readyz")
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK, fmt.Sprintf("%d %s", resp.StatusCode, body)
}
