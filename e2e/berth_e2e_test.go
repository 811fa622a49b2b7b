//go:build e2e

package e2e

// The harness: a berth process with its own directories, port and socket;
// its local API; manifests written atomically; CRI queries by label; and
// the cleanup that leaves the shared bed without berth-owned pods.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"

	"github.com/berth-agent/berth/e2e/testbed"
)

// The labels berth puts on its runtime objects (docs/architecture.md).
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
	labelManaged       = "io.berth.managed"
	annoRestartCount   = "io.kubernetes.container.restartCount"
)

// Polling of conditions: generous deadlines, never timing assertions.
const (
	pollEvery   = 50 * time.Millisecond
	waitTimeout = 60 * time.Second
)

// nodeName is the --hostname-override of every berth the tests start.
const nodeName = "e2e-node"

// fastBackoff makes crash loops short enough for tests.
var fastBackoff = []string{"--crashloop-backoff-initial", "1s", "--crashloop-backoff-max", "4s"}

// berth is one berth process (and its restarts) with its own directories,
// TCP port and unix socket, driven by one test.
type berth struct {
	t         *testing.T
	dir       string // private root of the directories below
	manifests string // --pod-manifest-path
	root      string // --root-dir
	logs      string // --pod-logs-dir
	addr      string // --listen
	socket    string // --socket
	logFile   string // berth's stderr, across restarts
	args      []string
	env       []string
	// bin, when set, is the binary start runs instead of berthBin (an
	// earlier berth, for the upgrade tests).
	bin      string
	http     *http.Client
	unixHTTP *http.Client

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd exits
	state  *os.ProcessState
}

// berthOptions tune a berth before it starts.
type berthOptions struct {
	args []string // extra flags
	env  []string // extra environment, KEY=VALUE
	// manifests are written into the manifest directory before berth
	// starts: file name -> content.
	manifests map[string]string
	// noStart prepares the berth without starting it.
	noStart bool
	// omit drops these of the harness's own flags (e.g. to set them in a
	// --config file instead), by name without dashes.
	omit []string
}

// newBerth prepares directories, a free port and a socket for a berth and
// starts it (unless opts.noStart). Cleanup stops it, prints its log when
// the test failed, and removes every berth-owned pod from the bed.
func newBerth(t *testing.T, opts berthOptions) *berth {
	t.Helper()
	cleanRuntime(t, "before the test")
	dir, err := os.MkdirTemp("", "berth-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	b := &berth{
		t:         t,
		dir:       dir,
		manifests: filepath.Join(dir, "manifests"),
		root:      filepath.Join(dir, "root"),
		logs:      filepath.Join(dir, "pods"),
		addr:      testbed.FreeAddr(t),
		socket:    filepath.Join(dir, "berth.sock"),
		logFile:   filepath.Join(dir, "berth.log"),
		env:       opts.env,
		http:      &http.Client{Timeout: 10 * time.Second},
	}
	b.unixHTTP = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", b.socket)
		},
	}}
	if err := os.MkdirAll(b.manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	level := os.Getenv("BERTH_E2E_LOG_LEVEL")
	if level == "" {
		level = "debug"
	}
	b.args = []string{"run"}
	for _, f := range [][2]string{
		{"pod-manifest-path", b.manifests},
		{"container-runtime-endpoint", bed.Endpoint},
		{"root-dir", b.root},
		{"pod-logs-dir", b.logs},
		{"listen", b.addr},
		{"socket", b.socket},
		{"hostname-override", nodeName},
		{"log-level", level},
	} {
		if !slices.Contains(opts.omit, f[0]) {
			b.args = append(b.args, "--"+f[0], f[1])
		}
	}
	b.args = append(b.args, opts.args...)
	t.Cleanup(func() {
		stopping := time.Now()
		b.stopOrKill()
		if d := time.Since(stopping); d > 3*time.Second {
			t.Logf("cleanup: stopping berth took %s", d.Round(time.Millisecond))
		}
		for _, bad := range []string{"WARNING: DATA RACE", "panic: ", "fatal error: "} {
			if b.logContains(bad) {
				t.Errorf("berth's log has %q", bad)
			}
		}
		if t.Failed() {
			b.dumpLog()
		}
		cleaning := time.Now()
		cleanRuntime(t, "after the test")
		if d := time.Since(cleaning); d > 3*time.Second {
			t.Logf("cleanup: removing the pods through CRI took %s", d.Round(time.Millisecond))
		}
		if err := testbed.UnmountBelow(b.dir); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		os.RemoveAll(b.dir)
	})
	for name, content := range opts.manifests {
		b.writeManifest(name, content)
	}
	if !opts.noStart {
		b.start()
	}
	return b
}

// use makes t (a subtest) the test b reports to, until the returned
// function restores the previous one. Subtests using it must not be
// parallel.
func (b *berth) use(t *testing.T) (restore func()) {
	prev := b.t
	b.t = t
	return func() { b.t = prev }
}

// start runs the berth binary; its stderr and stdout go to the log file.
func (b *berth) start() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil && !b.exitedLocked() {
		b.t.Fatalf("berth already running")
	}
	logf, err := os.OpenFile(b.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.t.Fatal(err)
	}
	bin := berthBin
	if b.bin != "" {
		bin = b.bin
	}
	fmt.Fprintf(logf, "=== e2e: starting %s %s\n", bin, strings.Join(b.args, " "))
	cmd := exec.Command(bin, b.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), b.env...)
	// berth must not outlive a test binary that dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		b.t.Fatalf("start berth: %v", err)
	}
	exited := make(chan struct{})
	b.cmd, b.exited, b.state = cmd, exited, nil
	go func() {
		_ = cmd.Wait()
		logf.Close()
		b.mu.Lock()
		b.state = cmd.ProcessState
		b.mu.Unlock()
		close(exited)
	}()
}

func (b *berth) exitedLocked() bool {
	select {
	case <-b.exited:
		return true
	default:
		return false
	}
}

// running reports whether the berth process is alive.
func (b *berth) running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd != nil && !b.exitedLocked()
}

// signal sends sig to berth and waits up to timeout for it to exit,
// returning its exit state (nil if it did not exit in time).
func (b *berth) signal(sig syscall.Signal, timeout time.Duration) *os.ProcessState {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(timeout):
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// stop sends SIGTERM and requires berth to exit within 30 s.
func (b *berth) stop() *os.ProcessState {
	b.t.Helper()
	st := b.signal(syscall.SIGTERM, 30*time.Second)
	if st == nil {
		b.kill()
		b.t.Fatalf("berth did not exit within 30s of SIGTERM")
	}
	return st
}

// kill sends SIGKILL and waits for the process to be gone.
func (b *berth) kill() {
	b.t.Helper()
	if b.signal(syscall.SIGKILL, 30*time.Second) == nil && b.running() {
		b.t.Fatalf("berth survived SIGKILL")
	}
}

// stopOrKill ends a running berth for cleanup: SIGTERM, then SIGKILL.
func (b *berth) stopOrKill() {
	if !b.running() {
		return
	}
	if b.signal(syscall.SIGTERM, 20*time.Second) == nil {
		b.t.Errorf("berth did not exit within 20s of SIGTERM; killing it")
		b.signal(syscall.SIGKILL, 20*time.Second)
	}
}

// dumpLog prints berth's log (its last 400 lines) into the test output.
func (b *berth) dumpLog() {
	data, err := os.ReadFile(b.logFile)
	if err != nil {
		b.t.Logf("berth log: %v", err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	const max = 400
	if len(lines) > max {
		b.t.Logf("berth log (%s, last %d of %d lines):", b.logFile, max, len(lines))
		lines = lines[len(lines)-max:]
	} else {
		b.t.Logf("berth log (%s):", b.logFile)
	}
	b.t.Log("\n" + strings.Join(lines, "\n"))
}

// logContains reports whether berth's log has a line containing s.
func (b *berth) logContains(s string) bool {
	data, _ := os.ReadFile(b.logFile)
	return strings.Contains(string(data), s)
}

// waitFor polls cond every 50 ms until it holds, for at most timeout, and
// returns how long it took. It fails the test when time runs out (with
// cond's last detail) or when berth exits while it waits.
func (b *berth) waitFor(what string, timeout time.Duration, cond func() (bool, string)) time.Duration {
	b.t.Helper()
	return waitCond(b.t, what, timeout, func() (bool, string) {
		ok, detail := cond()
		if ok {
			return true, detail
		}
		b.mu.Lock()
		dead := b.cmd != nil && b.exitedLocked()
		state := b.state
		b.mu.Unlock()
		if dead {
			b.t.Fatalf("berth exited (%v) while waiting for %s; last: %s", state, what, detail)
		}
		return false, detail
	})
}

// waitCond polls cond every 50 ms until it holds, for at most timeout, and
// returns how long it took; it fails t when time runs out.
func waitCond(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) time.Duration {
	t.Helper()
	started := time.Now()
	for {
		ok, detail := cond()
		if ok {
			return time.Since(started)
		}
		if time.Since(started) > timeout {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, detail)
		}
		time.Sleep(pollEvery)
	}
}

// podName is the name berth gives the pod of a manifest named name.
func podName(name string) string { return name + "-" + nodeName }

// --- local API ---

// get fetches path and returns status and body: health, readiness and
// metrics from the TCP listener, pod data over the unix socket, where
// berth serves it by default (--listen-pods=none).
func (b *berth) get(path string) (int, []byte, error) {
	switch path {
	case "/healthz", "/readyz", "/metrics":
		return getFrom(b.http, "http://"+b.addr+path)
	}
	return b.getUnix(path)
}

// getUnix fetches path over the unix socket.
func (b *berth) getUnix(path string) (int, []byte, error) {
	return getFrom(b.unixHTTP, "http://berth"+path)
}

func getFrom(c *http.Client, url string) (int, []byte, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// status returns a one-line "CODE body" of path, or the error.
func (b *berth) status(path string) (int, string) {
	code, body, err := b.get(path)
	if err != nil {
		return 0, err.Error()
	}
	return code, strings.TrimSpace(string(body))
}

// waitReady waits for /readyz to answer 200 and returns how long it took.
func (b *berth) waitReady() time.Duration {
	b.t.Helper()
	return b.waitFor("/readyz 200", waitTimeout, func() (bool, string) {
		code, body := b.status("/readyz")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
}

// pods fetches /pods as a PodList.
func (b *berth) pods() (*v1.PodList, error) {
	code, body, err := b.get("/pods")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /pods: %d %s", code, body)
	}
	var list v1.PodList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET /pods: %w: %.300s", err, body)
	}
	if list.Kind != "PodList" || list.APIVersion != "v1" {
		return nil, fmt.Errorf("GET /pods: kind %q apiVersion %q, want PodList v1", list.Kind, list.APIVersion)
	}
	return &list, nil
}

// mustPods is pods failing the test on error.
func (b *berth) mustPods() *v1.PodList {
	b.t.Helper()
	list, err := b.pods()
	if err != nil {
		b.t.Fatal(err)
	}
	return list
}

// apiPod returns the pod named name (the full name, with node suffix) from
// /pods, nil when absent.
func (b *berth) apiPod(name string) (*v1.Pod, error) {
	list, err := b.pods()
	if err != nil {
		return nil, err
	}
	var found *v1.Pod
	for i := range list.Items {
		if list.Items[i].Name == name && list.Items[i].Namespace == "default" {
			if found != nil {
				return nil, fmt.Errorf("/pods lists %s twice (uids %s and %s)", name, found.UID, list.Items[i].UID)
			}
			found = &list.Items[i]
		}
	}
	return found, nil
}

// waitPod waits until /pods shows the pod name satisfying cond and
// returns it.
func (b *berth) waitPod(name, what string, cond func(*v1.Pod) bool) *v1.Pod {
	b.t.Helper()
	var got *v1.Pod
	took := b.waitFor(fmt.Sprintf("pod %s: %s", name, what), waitTimeout, func() (bool, string) {
		p, err := b.apiPod(name)
		if err != nil {
			return false, err.Error()
		}
		if p == nil {
			return false, "not in /pods"
		}
		got = p
		return cond(p), describePod(p)
	})
	b.t.Logf("pod %s %s after %s", name, what, took.Round(time.Millisecond))
	return got
}

// waitRunning waits for the pod to be Running and Ready in /pods.
func (b *berth) waitRunning(name string) *v1.Pod {
	b.t.Helper()
	return b.waitPod(name, "Running and Ready", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && podReady(p)
	})
}

// podReady reports the pod's Ready condition.
func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// podCondition returns the pod's condition of type typ, or nil.
func podCondition(p *v1.Pod, typ v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// containerStatus returns the status of the (app) container name, or nil.
func containerStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// describePod is a one-line summary of a pod's status for failure messages.
func describePod(p *v1.Pod) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "uid=%s phase=%s reason=%q message=%q ready=%v podIP=%s", p.UID, p.Status.Phase, p.Status.Reason, p.Status.Message, podReady(p), p.Status.PodIP)
	for _, cs := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		fmt.Fprintf(&sb, " [%s restarts=%d %s id=%s]", cs.Name, cs.RestartCount, describeState(cs.State), shortID(cs.ContainerID))
	}
	return sb.String()
}

func describeState(s v1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Waiting != nil:
		return fmt.Sprintf("waiting(%s: %s)", s.Waiting.Reason, s.Waiting.Message)
	case s.Terminated != nil:
		return fmt.Sprintf("terminated(%d %s)", s.Terminated.ExitCode, s.Terminated.Reason)
	}
	return "none"
}

func shortID(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		id = id[i+3:]
	}
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// --- manifests ---

// writeManifest writes a manifest atomically: into a dotfile of the
// directory (which berth ignores), then renamed into place.
func (b *berth) writeManifest(name, content string) {
	b.t.Helper()
	tmp, err := os.CreateTemp(b.manifests, ".tmp-"+name+"-")
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		b.t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		b.t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(b.manifests, name)); err != nil {
		b.t.Fatal(err)
	}
}

// removeManifest removes a manifest file.
func (b *berth) removeManifest(name string) {
	b.t.Helper()
	if err := os.Remove(filepath.Join(b.manifests, name)); err != nil {
		b.t.Fatal(err)
	}
}

// manifestPath is the absolute path of a manifest file.
func (b *berth) manifestPath(name string) string { return filepath.Join(b.manifests, name) }

// podManifest renders a pod as YAML, as an operator would write it.
func podManifest(p *v1.Pod) string {
	p.APIVersion, p.Kind = "v1", "Pod"
	data, err := yaml.Marshal(p)
	if err != nil {
		panic(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		// Zero values the YAML encoder writes but no operator would.
		switch strings.TrimSpace(line) {
		case "creationTimestamp: null", "status: {}", "resources: {}":
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// sleepForever keeps a container running and makes it exit 0 at once on
// SIGTERM (PID 1 ignores an untrapped TERM).
const sleepForever = "trap 'exit 0' TERM; sleep 3600 & wait"

// newPod is a pod named name (berth appends the node name) with the given
// containers and a short grace period.
func newPod(name string, containers ...v1.Container) *v1.Pod {
	grace := int64(2)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers:                    containers,
		},
	}
}

// shContainer is a busybox container running script with sh -c.
func shContainer(name, script string) v1.Container {
	return v1.Container{
		Name:    name,
		Image:   "busybox:1.36",
		Command: []string{"sh", "-c", script},
	}
}

// sleeper is a pod with one container "main" that runs until stopped.
func sleeper(name string) *v1.Pod {
	return newPod(name, shContainer("main", "echo started; "+sleepForever))
}

// --- CRI ---

// criCtx is a context for one round of CRI calls.
func criCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// sandboxesOf lists the berth-owned sandboxes of the pod name (full name).
func sandboxesOf(name string) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := criCtx()
	defer cancel()
	resp, err := bed.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{labelPodName: name, labelManaged: "true"},
	}})
	if err != nil {
		return nil, err
	}
	return resp.Items, nil
}

// containersOf lists the berth-owned containers of the pod name.
func containersOf(name string) ([]*runtimeapi.Container, error) {
	ctx, cancel := criCtx()
	defer cancel()
	resp, err := bed.Runtime().ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{labelPodName: name, labelManaged: "true"},
	}})
	if err != nil {
		return nil, err
	}
	return resp.Containers, nil
}

// readySandboxes filters the ready sandboxes.
func readySandboxes(sbs []*runtimeapi.PodSandbox) []*runtimeapi.PodSandbox {
	var out []*runtimeapi.PodSandbox
	for _, s := range sbs {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			out = append(out, s)
		}
	}
	return out
}

// runningContainers filters the running containers.
func runningContainers(cs []*runtimeapi.Container) []*runtimeapi.Container {
	var out []*runtimeapi.Container
	for _, c := range cs {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			out = append(out, c)
		}
	}
	return out
}

// runtimePod is what CRI shows of one pod: its single ready sandbox and
// the single running container named container in it.
type runtimePod struct {
	sandbox   *runtimeapi.PodSandbox
	container *runtimeapi.Container
}

// runtimeState reads the pod name from CRI and says whether it has exactly
// one ready sandbox with exactly one running container named container
// (and, if uid is set, of that UID).
func runtimeState(name, container string, uid types.UID) (runtimePod, bool, string) {
	sbs, err := sandboxesOf(name)
	if err != nil {
		return runtimePod{}, false, err.Error()
	}
	cs, err := containersOf(name)
	if err != nil {
		return runtimePod{}, false, err.Error()
	}
	ready := readySandboxes(sbs)
	var running []*runtimeapi.Container
	for _, c := range runningContainers(cs) {
		if c.Labels[labelContainerName] == container {
			running = append(running, c)
		}
	}
	detail := fmt.Sprintf("%d sandboxes (%d ready), %d containers (%d named %s running)", len(sbs), len(ready), len(cs), len(running), container)
	if len(ready) != 1 || len(running) != 1 || running[0].PodSandboxId != ready[0].Id {
		return runtimePod{}, false, detail
	}
	if uid != "" && ready[0].Labels[labelPodUID] != string(uid) {
		return runtimePod{}, false, fmt.Sprintf("ready sandbox has uid %s, want %s", ready[0].Labels[labelPodUID], uid)
	}
	return runtimePod{sandbox: ready[0], container: running[0]}, true, detail
}

// waitRuntime waits until CRI shows the pod name with one ready sandbox
// and one running container named container (of uid when set).
func (b *berth) waitRuntime(name, container string, uid types.UID) runtimePod {
	b.t.Helper()
	var rp runtimePod
	b.waitFor(fmt.Sprintf("CRI: %s with one ready sandbox and container %s running", name, container), waitTimeout, func() (bool, string) {
		var ok bool
		var detail string
		rp, ok, detail = runtimeState(name, container, uid)
		return ok, detail
	})
	return rp
}

// waitGone waits until CRI has no sandbox and no container of the pod name.
func (b *berth) waitGone(name string) time.Duration {
	b.t.Helper()
	return b.waitFor("CRI: no sandbox and no container of "+name, waitTimeout, func() (bool, string) {
		sbs, err := sandboxesOf(name)
		if err != nil {
			return false, err.Error()
		}
		cs, err := containersOf(name)
		if err != nil {
			return false, err.Error()
		}
		return len(sbs) == 0 && len(cs) == 0, fmt.Sprintf("%d sandboxes, %d containers", len(sbs), len(cs))
	})
}

// restartCountAnnotation reads a container's restart count annotation.
func restartCountAnnotation(c *runtimeapi.Container) (int, error) {
	v, ok := c.Annotations[annoRestartCount]
	if !ok {
		return 0, fmt.Errorf("container %s lacks the %s annotation", shortID(c.Id), annoRestartCount)
	}
	return strconv.Atoi(v)
}

// cleanRuntime stops and removes every berth-owned sandbox (and container)
// of the bed, so the next test starts from an empty runtime. Leftovers are
// reported: they mean berth (or the test) left something behind. A
// container whose start is still in flight in the runtime (a berth stopped
// mid-StartContainer) cannot be removed until the start ends, nor one whose
// removal berth sent just before it stopped until that removal ends: the
// pass is repeated for up to 30 s while the runtime says so.
func cleanRuntime(t *testing.T, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	deadline := time.Now().Add(30 * time.Second)
	for first := true; ; first = false {
		err := cleanRuntimePass(ctx, t, when, first)
		if err == nil {
			return
		}
		retry := strings.Contains(err.Error(), "starting state") || strings.Contains(err.Error(), "removing state") ||
			strings.Contains(err.Error(), runningTaskError)
		if strings.Contains(err.Error(), "cached result") {
			// containerd 1.6 killed while libcni wrote a sandbox's cache
			// (TestCrashCycles does that) cannot stop that sandbox until
			// the entry is removed: the operator's repair, not berth's.
			removed, rerr := bed.RepairCNICache()
			t.Logf("clean runtime %s: removed broken CNI cache entries %v (%v)", when, removed, rerr)
			retry = len(removed) > 0
		}
		if !retry || time.Now().After(deadline) {
			t.Errorf("clean runtime %s: %v", when, err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runningTaskError is containerd's refusal to remove a container whose
// task still runs.
const runningTaskError = "cannot delete running task"

// cleanRuntimePass is one pass of cleanRuntime; it logs what it removes on
// the first pass.
func cleanRuntimePass(ctx context.Context, t *testing.T, when string, first bool) error {
	t.Helper()
	rt := bed.Runtime()
	managed := map[string]string{labelManaged: "true"}
	sbResp, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: managed}})
	if err != nil {
		return fmt.Errorf("ListPodSandbox: %w", err)
	}
	cResp, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: managed}})
	if err != nil {
		return fmt.Errorf("ListContainers: %w", err)
	}
	sbs, cs := sbResp.Items, cResp.Containers
	if first && len(sbs)+len(cs) > 0 {
		t.Logf("clean runtime %s: removing %d berth-owned sandboxes and %d containers", when, len(sbs), len(cs))
	}
	var errs []error
	for _, c := range cs {
		// A container already gone is clean: a removal berth sent just
		// before it stopped (garbage collection of a crash loop) may land
		// in the runtime after the listing.
		if _, err := rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.Id, Timeout: 0}); status.Code(err) == codes.NotFound {
			continue
		} else if err != nil {
			errs = append(errs, fmt.Errorf("stop container %s: %w", shortID(c.Id), err))
		}
		if _, err := rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.Id}); err != nil && status.Code(err) != codes.NotFound {
			if strings.Contains(err.Error(), runningTaskError) {
				// containerd 1.6 can be left with a container whose
				// start landed after the stop: CRI reports it exited,
				// so StopContainer does nothing, while its task runs.
				// Kill the task through containerd's own API; the next
				// pass removes the container.
				if out, kerr := bed.Ctr("task", "kill", "--signal", "SIGKILL", c.Id); kerr != nil {
					t.Logf("clean runtime %s: ctr task kill %s: %v: %s", when, shortID(c.Id), kerr, out)
				}
			}
			errs = append(errs, fmt.Errorf("remove container %s: %w", shortID(c.Id), err))
		}
	}
	for _, s := range sbs {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", shortID(s.Id), err))
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", shortID(s.Id), err))
		}
	}
	return errors.Join(errs...)
}

// criLogLines parses a CRI log file ("TIME STREAM TAG CONTENT" lines) into
// its content lines, joining partial (P) lines.
func criLogLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	var partial strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 4)
		if len(fields) < 3 {
			return nil, fmt.Errorf("%s: not a CRI log line: %q", path, sc.Text())
		}
		content := ""
		if len(fields) == 4 {
			content = fields[3]
		}
		partial.WriteString(content)
		if fields[2] == "F" {
			lines = append(lines, partial.String())
			partial.Reset()
		}
	}
	return lines, sc.Err()
}

// podLogPath is where berth's layout puts a container's log.
func (b *berth) podLogPath(p *v1.Pod, container string, restart int) string {
	return filepath.Join(b.logs, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), container, fmt.Sprintf("%d.log", restart))
}
