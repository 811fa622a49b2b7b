package cli

import (
	"bytes"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/cli/printers"
)

// runCLI runs one berth command in-process against the fake daemon.
func runCLI(t *testing.T, d *fakeDaemon, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Execute("dev", append(args, "--socket", d.socket), &out, &errb)
	return code, out.String(), errb.String()
}

func TestPodsGolden(t *testing.T) {
	pinClock(t)
	d := startFakeDaemon(t)
	tests := []struct {
		golden string
		args   []string
	}{
		{"pods.txt", []string{"pods"}},
		{"pods-all.txt", []string{"pods", "-A"}},
		{"pods-wide.txt", []string{"ps", "-o", "wide"}},
		{"pods-default-namespace.txt", []string{"pods", "-n", "default"}},
		{"pods-by-manifest-name.txt", []string{"pods", "crash", "init-node1", "etcd"}},
		{"pod-web.json", []string{"pods", "web", "-o", "json"}},
		{"pods-kube-system.yaml", []string{"pods", "-o", "yaml", "-n", "kube-system"}},
		{"pods-default.json", []string{"pods", "-o", "json", "-n", "default", "-l", "app=web"}},
		{"pods-no-headers.txt", []string{"pods", "-A", "--no-headers", "-l", "tier in (edge),app"}},
		{"events.txt", []string{"events", "-A"}},
		{"events-default.txt", []string{"events", "-n", "default"}},
		{"events-crash.txt", []string{"events", "crash", "--no-headers"}},
		{"events-kube-system.yaml", []string{"events", "-n", "kube-system", "-o", "yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			code, out, errb := runCLI(t, d, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errb)
			}
			// stdout is the table (or document); what goes to stderr is
			// kept in the golden file after a marker.
			if errb != "" {
				out += "--- stderr\n" + errb
			}
			golden(t, tt.golden, out)
		})
	}
}

func TestDescribeGolden(t *testing.T) {
	pinClock(t)
	d := startFakeDaemon(t)
	for _, name := range []string{"crash", "web", "init", "bad-node1"} {
		t.Run(name, func(t *testing.T) {
			code, out, errb := runCLI(t, d, "describe", name)
			if code != 0 || errb != "" {
				t.Fatalf("exit %d, stderr %q", code, errb)
			}
			golden(t, "describe-"+name+".txt", out)
		})
	}
	// kubectl's forms name the pod resource first: the same pod, the
	// same page.
	for _, args := range [][]string{{"describe", "pod", "web"}, {"describe", "pods", "web-node1"}, {"describe", "pods/web"}, {"describe", "po/web-node1"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errb := runCLI(t, d, args...)
			if code != 0 || errb != "" {
				t.Fatalf("exit %d, stderr %q", code, errb)
			}
			golden(t, "describe-web.txt", out)
		})
	}
}

// TestPodStatusColumn pins the STATUS words, READY and RESTARTS of every
// fixture, so a change in the rules shows here by name and not only as a
// golden diff.
func TestPodStatusColumn(t *testing.T) {
	want := map[string]struct {
		status          string
		ready, restarts int
	}{
		"bad-node1":       {"Invalid", 0, 0},
		"crash-node1":     {"CrashLoopBackOff", 0, 5},
		"creating-node1":  {"ContainerCreating", 0, 0},
		"failed-node1":    {"Error", 0, 0},
		"init-node1":      {"Init:1/2", 0, 0},
		"initcrash-node1": {"Init:CrashLoopBackOff", 0, 3},
		"job-node1":       {"Completed", 0, 0},
		"pull-node1":      {"ImagePullBackOff", 0, 0},
		"sidecar-node1":   {"NotReady", 1, 0},
		"web-node1":       {"ManifestInvalid", 1, 0},
		"web2-node1":      {"WaitingForPreviousPod", 0, 0},
		"etcd-node1":      {"Terminating", 0, 0},
	}
	pods := fixturePods()
	if len(pods) != len(want) {
		t.Fatalf("%d fixtures, %d expectations", len(pods), len(want))
	}
	for i := range pods {
		s := printers.Summarize(&pods[i])
		w := want[pods[i].Name]
		if s.Status != w.status || s.Ready != w.ready || s.Restarts != w.restarts {
			t.Errorf("%s: status %q ready %d restarts %d, want %q %d %d", pods[i].Name, s.Status, s.Ready, s.Restarts, w.status, w.ready, w.restarts)
		}
	}
}

func TestLogsRequests(t *testing.T) {
	d := startFakeDaemon(t)
	tests := []struct {
		name       string
		args       []string
		wantReq    string
		wantStderr string
	}{
		{"defaults", []string{"logs", "web"}, "/pods/default/web-node1/log?container=httpd&follow=false&previous=false&timestamps=false", ""},
		{"flags after the pod", []string{"logs", "crash-node1", "-f", "--tail", "5", "-p", "--timestamps"},
			"/pods/default/crash-node1/log?container=app&follow=true&previous=true&tailLines=5&timestamps=true", ""},
		{"long flags before the pod", []string{"logs", "--follow", "--previous", "--container", "app", "-n", "default", "crash"},
			"/pods/default/crash-node1/log?container=app&follow=true&previous=true&timestamps=false", ""},
		{"first app container by default, with a note", []string{"logs", "sidecar"},
			"/pods/default/sidecar-node1/log?container=app&follow=false&previous=false&timestamps=false", `Defaulted container "app" out of: app, log-shipper`},
		{"init pod notes its init containers", []string{"logs", "init", "--tail=0"},
			"/pods/default/init-node1/log?container=app&follow=false&previous=false&tailLines=0&timestamps=false", `Defaulted container "app" out of: app, fetch (init), unpack (init)`},
		{"namespace from -n", []string{"logs", "-n", "kube-system", "etcd", "-c", "etcd"},
			"/pods/kube-system/etcd-node1/log?container=etcd&follow=false&previous=false&timestamps=false", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(d.logRequests())
			code, out, errb := runCLI(t, d, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errb)
			}
			q, _ := url.ParseQuery(tt.wantReq[strings.Index(tt.wantReq, "?")+1:])
			if c := q.Get("container"); out != c+" line 1\n"+c+" line 2\n" {
				t.Errorf("stdout %q", out)
			}
			reqs := d.logRequests()
			if len(reqs) != before+1 || reqs[before] != tt.wantReq {
				t.Errorf("requests %q, want %q", reqs[before:], tt.wantReq)
			}
			if strings.TrimSpace(errb) != tt.wantStderr {
				t.Errorf("stderr %q, want %q", errb, tt.wantStderr)
			}
		})
	}
}

func TestClientErrors(t *testing.T) {
	d := startFakeDaemon(t)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"unknown pod", []string{"logs", "nope"}, 1, `berth logs: pod "nope" not found (berth pods lists them)`},
		{"wrong namespace", []string{"describe", "-n", "kube-system", "web"}, 1, `berth describe: pod "web" not found in namespace kube-system`},
		{"daemon's own message", []string{"logs", "web", "-c", "missing"}, 1, "berth logs: container missing is not valid for pod web-node1"},
		{"logs wants one pod", []string{"logs"}, 2, "berth logs: want exactly one POD"},
		{"describe wants a pod", []string{"describe"}, 2, "berth describe: want at least one POD"},
		{"bad output format", []string{"pods", "-o", "table"}, 2, `berth pods: -o "table": want wide, json, yaml, name, jsonpath=TEMPLATE or jsonpath-file=FILE`},
		{"no pods in namespace", []string{"pods", "-n", "empty"}, 0, "No resources found in empty namespace (other namespaces hold some: berth pods -A).\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errb := runCLI(t, d, tt.args...)
			if code != tt.wantCode || !strings.Contains(errb, tt.wantStderr) {
				t.Errorf("exit %d stderr %q, want %d and %q", code, errb, tt.wantCode, tt.wantStderr)
			}
		})
	}
}

// TestDaemonUnreachable checks the messages an operator gets when berth is
// not running, left a stale socket, or the socket is not theirs to open.
func TestDaemonUnreachable(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.sock")
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	for _, tt := range []struct {
		socket string
		want   string
	}{
		{missing, "berth daemon not reachable at " + missing + ": no socket there: is berth running?"},
		{stale, "berth daemon not reachable at " + stale + ": connection refused: the socket is left over from a berth that is not running any more"},
	} {
		for _, cmd := range []string{"pods", "logs", "describe"} {
			var out, errb bytes.Buffer
			code := Execute("dev", []string{cmd, "web", "--socket", tt.socket}, &out, &errb)
			if code != 1 || !strings.Contains(errb.String(), tt.want) {
				t.Errorf("%s on %s: exit %d, stderr %q, want %q", cmd, tt.socket, code, errb.String(), tt.want)
			}
		}
	}

	// A daemon that accepts but never answers.
	hung := filepath.Join(dir, "hung.sock")
	hl, err := net.Listen("unix", hung)
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Close()
	go func() {
		for {
			conn, err := hl.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	old := requestTimeout
	requestTimeout = 100 * time.Millisecond
	defer func() { requestTimeout = old }()
	for _, cmd := range []string{"pods", "logs", "describe"} {
		var out, errb bytes.Buffer
		code := Execute("dev", []string{cmd, "web", "--socket", hung}, &out, &errb)
		if want := "berth daemon at " + hung + " did not answer within 100ms: is it stuck?"; code != 1 || !strings.Contains(errb.String(), want) {
			t.Errorf("%s on a hung daemon: exit %d, stderr %q, want %q", cmd, code, errb.String(), want)
		}
	}

	t.Setenv("BERTH_SOCKET", missing)
	var out, errb bytes.Buffer
	if code := Execute("dev", []string{"pods"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), missing) {
		t.Errorf("BERTH_SOCKET not used: exit %d, stderr %q", code, errb.String())
	}
}
