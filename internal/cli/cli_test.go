package cli

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-agent/berth/internal/rollback"
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
		s := summarize(&pods[i])
		w := want[pods[i].Name]
		if s.status != w.status || s.ready != w.ready || s.restarts != w.restarts {
			t.Errorf("%s: status %q ready %d restarts %d, want %q %d %d", pods[i].Name, s.status, s.ready, s.restarts, w.status, w.ready, w.restarts)
		}
	}

	// kubectl's init rules: a failed init container under Never, an init
	// container killed by a signal, and a sidecar that counts as ready.
	always := v1.ContainerRestartPolicyAlways
	started := true
	extra := []struct {
		name string
		pod  v1.Pod
		want string
	}{
		{"init exit code", v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "i"}}, Containers: []v1.Container{{Name: "a"}}},
			Status: v1.PodStatus{Phase: v1.PodFailed, InitContainerStatuses: []v1.ContainerStatus{{Name: "i", ContainerID: "x",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 4}}}}}}, "Init:ExitCode:4 0/1"},
		{"init signal", v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "i"}}, Containers: []v1.Container{{Name: "a"}}},
			Status: v1.PodStatus{Phase: v1.PodFailed, InitContainerStatuses: []v1.ContainerStatus{{Name: "i", ContainerID: "x",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, Signal: 9}}}}}}, "Init:Signal:9 0/1"},
		{"sidecar running, app running", v1.Pod{
			Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "side", RestartPolicy: &always}}, Containers: []v1.Container{{Name: "a"}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodInitialized, Status: v1.ConditionTrue}},
				InitContainerStatuses: []v1.ContainerStatus{{Name: "side", ContainerID: "s", Started: &started, Ready: true, State: runningState(0)}},
				ContainerStatuses:     []v1.ContainerStatus{{Name: "a", ContainerID: "a", Ready: true, State: runningState(0)}}}}, "Running 2/2"},
		{"exit without reason", v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}},
			Status: v1.PodStatus{Phase: v1.PodFailed, ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 5}}}}}}, "ExitCode:5 0/1"},
		{"terminating but already failed stays failed", v1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptrTime(fixAt(0))},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}},
			Status: v1.PodStatus{Phase: v1.PodFailed, ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}}}, "Error 0/1"},
	}
	// A broken manifest replaces only the words that say all is well.
	brokenManifest := []v1.PodCondition{{Type: conditionManifestValid, Status: v1.ConditionFalse, Reason: "DecodeError", Message: "web.yaml:3: invalid YAML"}}
	rolledBackCond := []v1.PodCondition{{Type: rollback.ConditionLatestVersion, Status: v1.ConditionFalse, Reason: rollback.ReasonRolledBack, Message: "version b failed"}}
	validManifest := []v1.PodCondition{{Type: conditionManifestValid, Status: v1.ConditionTrue}}
	oneApp := v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}
	extra = append(extra, []struct {
		name string
		pod  v1.Pod
		want string
	}{
		{"running, manifest broken", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: brokenManifest,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", Ready: true, State: runningState(0)}}}}, "ManifestInvalid 1/1"},
		{"running, manifest valid", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: validManifest,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", Ready: true, State: runningState(0)}}}}, "Running 1/1"},
		{"completed, manifest broken", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodSucceeded, Conditions: brokenManifest,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", State: terminatedState(0, "Completed", "a", 0, time.Second)}}}}, "ManifestInvalid 0/1"},
		{"crash loop keeps its word", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: brokenManifest,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", State: waitingState("CrashLoopBackOff", "")}}}}, "CrashLoopBackOff 0/1"},
		{"terminating wins", v1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptrTime(fixAt(0))}, Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: brokenManifest,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", Ready: true, State: runningState(0)}}}}, "Terminating 1/1"},
		{"running a rolled-back version", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: rolledBackCond,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", Ready: true, State: runningState(0)}}}}, "RolledBack 1/1"},
		{"a rolled-back version crash-looping keeps its word", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: rolledBackCond,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", State: waitingState("CrashLoopBackOff", "")}}}}, "CrashLoopBackOff 0/1"},
		{"a broken manifest shows before a rollback", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: append(slices.Clone(brokenManifest), rolledBackCond...),
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", Ready: true, State: runningState(0)}}}}, "ManifestInvalid 1/1"},
		{"refused manifest keeps its reason", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodFailed, Reason: "Invalid", Conditions: brokenManifest}}, "Invalid 0/1"},
	}...)
	for _, tt := range extra {
		s := summarize(&tt.pod)
		if got := fmt.Sprintf("%s %d/%d", s.status, s.ready, s.total); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
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

	// Permission errors cannot be provoked as root; the message is checked
	// on the error a non-root connect gets.
	c := newClient("/run/berth/berth.sock")
	err = c.dialError(&net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)})
	if want := "berth daemon not reachable at /run/berth/berth.sock: permission denied: the socket is mode 0660: run as root"; !strings.Contains(err.Error(), want) {
		t.Errorf("EACCES: %v, want %q", err, want)
	}
	err = c.dialError(errors.New("something else"))
	if err.Error() != "berth daemon not reachable at /run/berth/berth.sock: something else" {
		t.Errorf("other: %v", err)
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

func TestResolvePod(t *testing.T) {
	mk := func(name, ns, node string) v1.Pod {
		return v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1.PodSpec{NodeName: node}}
	}
	pods := []v1.Pod{
		mk("web-node1", "default", "node1"),
		mk("web-2-node1", "default", "node1"),
		mk("dns-node1", "default", "node1"),
		mk("dns-node1", "kube-system", "node1"),
		mk("web", "default", "node1"),  // a manifest named web-node1 would collide; exact names win
		mk("bad-node1", "default", ""), // rejected: no spec, so no node name
		mk("bad-2-node1", "default", ""),
	}
	tests := []struct {
		name, ns string
		want     string
		wantErr  string
	}{
		{"web-node1", "", "default/web-node1", ""},
		{"web", "", "default/web", ""},
		{"web-2", "", "default/web-2-node1", ""},
		{"dns", "kube-system", "kube-system/dns-node1", ""},
		{"dns", "", "", `pod "dns" is ambiguous: default/dns-node1, kube-system/dns-node1; pick one with -n NAMESPACE`},
		{"web-3", "", "", `pod "web-3" not found (berth pods lists them)`},
		{"bad", "", "default/bad-node1", ""},
		{"bad-2", "", "default/bad-2-node1", ""},
	}
	for _, tt := range tests {
		p, err := resolvePod(pods, tt.name, tt.ns)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%s: err %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || p.Namespace+"/"+p.Name != tt.want {
			t.Errorf("%s: %v %v, want %s", tt.name, p, err, tt.want)
		}
	}
}
