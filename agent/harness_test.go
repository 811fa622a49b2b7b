package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/cri"
	"github.com/berth-agent/berth/cri/gc"
	"github.com/berth-agent/berth/handlers"
	"github.com/berth-agent/berth/manifest"
)

const testNode = "node1"

// harness runs a real Agent over a real cri.Manager whose runtime and image
// services are the cri-api fakes, on a fake clock.
type harness struct {
	t      *testing.T
	clock  *clocktesting.FakeClock
	rt     *recordingRuntime
	img    *apitest.FakeImageService
	mgr    *cri.Manager
	store  *manifest.Store
	agent  *Agent
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

type harnessOpts struct {
	sources []string
	maxPods int
	rt      *recordingRuntime // reuse a runtime (adoption); nil makes one
	log     *slog.Logger      // nil discards (logs to t with -v)
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	if len(o.sources) == 0 {
		o.sources = []string{manifest.SourceFile}
	}
	if o.rt == nil {
		o.rt = newRecordingRuntime()
	}
	h := &harness{t: t, clock: clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)), rt: o.rt}
	h.img = apitest.NewFakeImageService()
	h.img.SetFakeImages([]string{"busybox:1.36"})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	if o.log != nil {
		log = o.log
	}
	events := NewEventLog(h.clock, log)
	root, logs := t.TempDir(), t.TempDir()
	h.mgr = cri.NewManager(h.rt, h.img, cri.Options{
		NodeName: testNode, RootDir: root, PodLogsDir: logs, Clock: h.clock, Recorder: events,
		CrashLoopBackoffInitial: 10 * time.Second, CrashLoopBackoffMax: 40 * time.Second,
	})
	h.store = manifest.NewStoreWithClock(h.clock, o.sources...)
	h.reg = prometheus.NewRegistry()
	h.agent = New(Config{HostIP: "192.0.2.10", MaxPods: o.maxPods, Clock: h.clock, Logger: log, Metrics: h.reg}, h.store, events, h.mgr, handlers.NewExecer(h.rt),
		gc.New(h.rt, h.img, h.mgr, gc.Options{RootDir: root, PodLogsDir: logs, Clock: h.clock}))
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.agent.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

// stop ends the agent and waits for every goroutine it started.
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("agent.Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		h.t.Fatal("agent did not stop")
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// pod parses a manifest the way the file source does.
func pod(t *testing.T, path, yaml string) *v1.Pod {
	t.Helper()
	res := manifest.Parse([]byte(yaml), manifest.Origin{Source: manifest.SourceFile, Path: path}, testNode)
	if len(res.Problems) > 0 || len(res.Pods) != 1 {
		t.Fatalf("manifest %s: %v", path, res.Problems)
	}
	return res.Pods[0]
}

func simplePod(t *testing.T, name, command string) *v1.Pod {
	return pod(t, "/m/"+name+".yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Always
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", %q]
`, name, command))
}

// apply delivers a snapshot of the given source.
func (h *harness) apply(source string, pods ...*v1.Pod) {
	h.t.Helper()
	if err := h.store.Apply(context.Background(), manifest.Snapshot{Source: source, Pods: pods}); err != nil {
		h.t.Fatal(err)
	}
}

// eventually steps the fake clock by a relist period at a time until cond
// holds; the agent's goroutines run in between.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for: %s", what)
		}
		h.clock.Step(100 * time.Millisecond)
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *harness) status(uid types.UID) *v1.Pod { return h.agent.status.get(uid) }

func (h *harness) phase(uid types.UID) v1.PodPhase {
	if p := h.status(uid); p != nil {
		return p.Status.Phase
	}
	return ""
}

// recordingRuntime is the cri-api fake runtime with an ordered log of the
// calls that start and stop pods, labelled by pod UID, and optional gates
// that hold StopContainer of a pod until released.
type recordingRuntime struct {
	*apitest.FakeRuntimeService

	mu       sync.Mutex // guards log, holdStop, starting and violations
	log      []string
	holdStop map[types.UID]chan struct{}
	// starting are containers whose StartContainer is in flight inside the
	// runtime: containerd refuses to remove them and does not stop them.
	starting map[string]bool
	// violations are runtime calls that would run a pod beside a
	// non-terminated other UID of its full name.
	violations []string
}

func newRecordingRuntime() *recordingRuntime {
	return &recordingRuntime{FakeRuntimeService: apitest.NewFakeRuntimeService(), holdStop: map[types.UID]chan struct{}{}, starting: map[string]bool{}}
}

func (r *recordingRuntime) record(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
}

func (r *recordingRuntime) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

func (r *recordingRuntime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	r.record("run:" + config.Metadata.Uid)
	r.checkExclusive("RunPodSandbox", config.Labels)
	return r.FakeRuntimeService.RunPodSandbox(ctx, config, handler)
}

func (r *recordingRuntime) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	r.checkExclusive("CreateContainer", config.Labels)
	return r.FakeRuntimeService.CreateContainer(ctx, sandboxID, config, sandboxConfig)
}

func (r *recordingRuntime) StartContainer(ctx context.Context, id string) error {
	r.FakeRuntimeService.Lock()
	var labels map[string]string
	if c, ok := r.Containers[id]; ok {
		labels = c.Labels
	}
	r.FakeRuntimeService.Unlock()
	r.checkExclusive("StartContainer", labels)
	return r.FakeRuntimeService.StartContainer(ctx, id)
}

func (r *recordingRuntime) RemoveContainer(ctx context.Context, id string) error {
	r.record("rm:" + id)
	r.mu.Lock()
	starting := r.starting[id]
	r.mu.Unlock()
	if starting {
		return grpcstatus.Errorf(codes.Unknown, "failed to set removing state for container %q: container is in starting state, can't be removed", id)
	}
	return r.FakeRuntimeService.RemoveContainer(ctx, id)
}

// checkExclusive records a violation if a pod of another UID with the full
// name in labels still has a ready sandbox or a container that is not
// exited: the call would run two UIDs of one full name at once.
func (r *recordingRuntime) checkExclusive(call string, labels map[string]string) {
	name, ns, uid := labels[cri.LabelPodName], labels[cri.LabelPodNamespace], labels[cri.LabelPodUID]
	other := func(l map[string]string) bool {
		return l[cri.LabelPodName] == name && l[cri.LabelPodNamespace] == ns && l[cri.LabelPodUID] != uid
	}
	var found []string
	r.FakeRuntimeService.Lock()
	for _, s := range r.Sandboxes {
		if other(s.Labels) && s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			found = append(found, "sandbox of uid "+s.Labels[cri.LabelPodUID]+" ready")
		}
	}
	for _, c := range r.Containers {
		if other(c.Labels) && c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			found = append(found, "container of uid "+c.Labels[cri.LabelPodUID]+" "+c.State.String())
		}
	}
	r.FakeRuntimeService.Unlock()
	if len(found) > 0 {
		r.mu.Lock()
		r.violations = append(r.violations, fmt.Sprintf("%s for uid %s while %v", call, uid, found))
		r.mu.Unlock()
	}
}

func (r *recordingRuntime) exclusivityViolations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.violations...)
}

// startInFlight adds to uid's newest ready sandbox a copy of its container
// name, CREATED, whose StartContainer is still in flight inside the runtime:
// what a berth killed right after sending StartContainer leaves behind.
func (r *recordingRuntime) startInFlight(uid types.UID, name string, at time.Time) string {
	r.FakeRuntimeService.Lock()
	defer r.FakeRuntimeService.Unlock()
	var model *apitest.FakeContainer
	for _, c := range r.Containers {
		if c.Labels[cri.LabelPodUID] == string(uid) && c.Metadata.Name == name {
			model = c
		}
	}
	if model == nil {
		panic("no container " + name + " of " + string(uid))
	}
	id := "inflight-" + string(uid)[:8]
	r.Containers[id] = &apitest.FakeContainer{SandboxID: model.SandboxID, ContainerStatus: runtimeapi.ContainerStatus{
		Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: model.Metadata.Attempt + 1},
		State: runtimeapi.ContainerState_CONTAINER_CREATED, CreatedAt: at.UnixNano(),
		Image: model.Image, ImageRef: model.ImageRef, Labels: model.Labels, Annotations: model.Annotations,
	}}
	r.mu.Lock()
	r.starting[id] = true
	r.mu.Unlock()
	return id
}

// finishStart ends the in-flight start of id: the container runs, or the
// start failed and the runtime marked it exited, as containerd does.
func (r *recordingRuntime) finishStart(id string, ok bool, at time.Time) {
	r.FakeRuntimeService.Lock()
	c := r.Containers[id]
	if ok {
		c.State, c.StartedAt = runtimeapi.ContainerState_CONTAINER_RUNNING, at.UnixNano()
	} else {
		c.State, c.FinishedAt, c.ExitCode, c.Reason = runtimeapi.ContainerState_CONTAINER_EXITED, at.UnixNano(), 128, "StartError"
	}
	r.FakeRuntimeService.Unlock()
	r.mu.Lock()
	delete(r.starting, id)
	r.mu.Unlock()
}

func (r *recordingRuntime) StopPodSandbox(ctx context.Context, id string) error {
	r.record("stop:" + r.sandboxUID(id))
	return r.FakeRuntimeService.StopPodSandbox(ctx, id)
}

func (r *recordingRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	r.FakeRuntimeService.Lock()
	var uid types.UID
	if c, ok := r.Containers[id]; ok {
		uid = types.UID(c.Labels[cri.LabelPodUID])
	}
	r.FakeRuntimeService.Unlock()
	r.mu.Lock()
	gate, starting := r.holdStop[uid], r.starting[id]
	r.mu.Unlock()
	if starting {
		return grpcstatus.Errorf(codes.Unknown, "container %q must be in running or unknown state, current state %q", id, "CONTAINER_CREATED")
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return r.FakeRuntimeService.StopContainer(ctx, id, timeout)
}

// hold makes StopContainer of uid's containers wait until the returned func
// is called.
func (r *recordingRuntime) hold(uid types.UID) (release func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.holdStop[uid] = ch
	r.mu.Unlock()
	return func() { close(ch) }
}

func (r *recordingRuntime) sandboxUID(id string) string {
	r.FakeRuntimeService.Lock()
	defer r.FakeRuntimeService.Unlock()
	if s, ok := r.Sandboxes[id]; ok {
		return s.Metadata.Uid
	}
	return "?"
}

// running counts the running containers and ready sandboxes of uid.
func (r *recordingRuntime) running(uid types.UID) (containers, sandboxes int) {
	r.FakeRuntimeService.Lock()
	defer r.FakeRuntimeService.Unlock()
	for _, c := range r.Containers {
		if c.Labels[cri.LabelPodUID] == string(uid) && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			containers++
		}
	}
	for _, s := range r.Sandboxes {
		if s.Metadata.Uid == string(uid) && s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			sandboxes++
		}
	}
	return containers, sandboxes
}

// objects counts every container and sandbox of uid, in any state.
func (r *recordingRuntime) objects(uid types.UID) int {
	r.FakeRuntimeService.Lock()
	defer r.FakeRuntimeService.Unlock()
	n := 0
	for _, c := range r.Containers {
		if c.Labels[cri.LabelPodUID] == string(uid) {
			n++
		}
	}
	for _, s := range r.Sandboxes {
		if s.Metadata.Uid == string(uid) {
			n++
		}
	}
	return n
}

// exit marks uid's running containers exited with code, as if they died.
func (r *recordingRuntime) exit(uid types.UID, code int32, at time.Time) {
	r.FakeRuntimeService.Lock()
	defer r.FakeRuntimeService.Unlock()
	for _, c := range r.Containers {
		if c.Labels[cri.LabelPodUID] == string(uid) && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			c.State = runtimeapi.ContainerState_CONTAINER_EXITED
			c.ExitCode = code
			c.FinishedAt = at.UnixNano()
		}
	}
}

// calls returns how many times the fake saw each of the named methods.
func (r *recordingRuntime) calls(names ...string) map[string]int {
	out := map[string]int{}
	for _, c := range r.GetCalls() {
		for _, n := range names {
			if c == n {
				out[n]++
			}
		}
	}
	return out
}
