package syncloop

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/gc"
	"github.com/berth-agent/berth/internal/handlers"
	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podtest"
	"github.com/berth-agent/berth/internal/rollback"
	"github.com/berth-agent/berth/internal/store"
)

// harness runs a real Loop over a real kuberuntime.Manager whose runtime and image
// services are the cri-api fakes, on a fake clock, inside the test's
// synctest bubble.
type harness struct {
	t      *testing.T
	clock  *clocktesting.FakeClock
	start  time.Time     // when the agent's tickers were made
	timers *atomic.Int64 // AfterFunc timers fired so far
	rt     *recordingRuntime
	img    *apitest.FakeImageService
	mgr    *kuberuntime.Manager
	store  *store.Store
	agent  *Loop
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

type harnessOpts struct {
	sources []string
	maxPods int
	rt      *recordingRuntime // reuse a runtime (adoption); nil makes one
	log     *slog.Logger      // nil discards (logs to t with -v)
	// relistPeriod replaces the agent's 1 s, for tests that must know
	// what wakes a lane.
	relistPeriod time.Duration
	// rollback configures the automatic rollback (off when zero).
	rollback rollback.Config
	// onReady is the agent's OnReady.
	onReady func()
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	if len(o.sources) == 0 {
		o.sources = []string{podspec.SourceFile}
	}
	if o.rt == nil {
		o.rt = newRecordingRuntime()
	}
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	h := &harness{t: t, clock: clocktesting.NewFakeClock(start), start: start, rt: o.rt}
	clk := podtest.NewAsyncClock(h.clock)
	h.timers = clk.Fired
	h.img = apitest.NewFakeImageService()
	h.img.SetFakeImages([]string{"busybox:1.36"})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	if o.log != nil {
		log = o.log
	}
	events := podevents.New(clk, log)
	root, logs := t.TempDir(), t.TempDir()
	h.mgr = kuberuntime.NewManager(h.rt, h.img, kuberuntime.Options{
		NodeName: podtest.Node, RootDir: root, PodLogsDir: logs, Clock: clk, Recorder: events,
		CrashLoopBackoffInitial: 10 * time.Second, CrashLoopBackoffMax: 40 * time.Second,
	})
	h.store = store.NewWithClock(h.clock, o.sources...)
	h.reg = prometheus.NewRegistry()
	h.agent = New(Config{NodeName: podtest.Node, HostIP: "192.0.2.10", MaxPods: o.maxPods, Clock: clk, Logger: log, Metrics: h.reg,
		RelistPeriod: o.relistPeriod, Rollback: o.rollback, OnReady: o.onReady}, h.store, events, h.mgr, handlers.NewExecer(h.rt),
		gc.New(h.rt, h.img, h.mgr, gc.Options{RootDir: root, PodLogsDir: logs, Clock: clk}))
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.agent.Run(ctx) }()
	t.Cleanup(h.stop)
	// The loop makes its tickers before it takes the first relist, and the
	// PLEG makes its own before that relist: from here on the clock's
	// ticks fall where step expects them.
	h.eventually("the first relist", func() bool { return h.passes("relist") > 0 })
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

// apply delivers a snapshot of the given source.
func (h *harness) apply(source string, pods ...*v1.Pod) {
	h.t.Helper()
	if err := h.store.Apply(context.Background(), podsnapshot.Snapshot{Source: source, Pods: pods}); err != nil {
		h.t.Fatal(err)
	}
}

// eventually waits until every goroutine of the test's synctest bubble is
// parked (on a channel, a fake-clock timer or the test) and checks that cond
// holds then: nothing changes any more until the test acts. It never moves
// the clock: tests step it themselves, so they know how much fake time a
// behaviour took.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	synctest.Wait()
	if !cond() {
		h.t.Fatalf("not so once every goroutine waits: %s", what)
	}
}

// passes is how many sync loop iterations woken by trigger (relist,
// housekeeping, resync, update) have finished.
func (h *harness) passes(trigger string) int {
	return int(testutil.ToFloat64(h.agent.metrics.loopIterations.WithLabelValues(trigger)))
}

// steps is how many pod worker steps of op (sync, terminate, remove) have
// finished, in every lane; a lane arms its retry timer before its step
// counts.
func (h *harness) steps(op string) uint64 {
	m := h.metric("berth_pod_worker_duration_seconds", "operation_type", op)
	return m.GetHistogram().GetSampleCount()
}

// metric is the series of name whose label is value, gathered from the
// agent's registry; an empty one when there is none yet. A gathering
// error is no failure here: while an old and a new UID share a name, the
// scrape-time collector repeats their series, which leaves the others
// whole.
func (h *harness) metric(name, label, value string) *dto.Metric {
	families, _ := h.reg.Gather()
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label == "" {
				return m
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m
				}
			}
		}
	}
	return &dto.Metric{}
}

// step moves the fake clock by d and waits until the sync loop has
// finished the relist, housekeeping and resync passes whose tickers d
// crosses, so whatever those passes hand to the lanes has been handed over
// when it returns. A pass is due when d crosses a multiple of its period
// counted from the harness's start, where the tickers were made. Tests
// step only once the previous step's passes are done, so no earlier pass
// is in flight to be mistaken for this one.
func (h *harness) step(d time.Duration) {
	h.t.Helper()
	now := h.clock.Now()
	before := map[string]int{}
	for trigger, period := range map[string]time.Duration{
		"relist": h.agent.cfg.RelistPeriod, "housekeeping": h.agent.cfg.HousekeepingPeriod, "resync": h.agent.cfg.SyncFrequency,
	} {
		if now.Add(d).Sub(h.start)/period > now.Sub(h.start)/period {
			before[trigger] = h.passes(trigger)
		}
	}
	h.clock.Step(d)
	for trigger, n := range before {
		h.eventually("the "+trigger+" pass after the step", func() bool { return h.passes(trigger) > n })
	}
}

// stepUntil steps the clock by d until cond holds, for behaviours that
// take an unknown number of ticks (probes start after a random delay);
// at most max steps. Once it holds, cond must keep holding until the test
// changes something: a step may come before the previous one's effect
// is seen, so a passing state could be stepped over.
func (h *harness) stepUntil(what string, d time.Duration, max int, cond func() bool) {
	h.t.Helper()
	for range max {
		if cond() {
			return
		}
		h.step(d)
	}
	h.eventually(what, cond)
}

func (h *harness) status(uid types.UID) *v1.Pod { return h.agent.status.Get(uid) }

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
	// lastCreated is the newest container's creation stamp (guarded by
	// the fake's lock).
	lastCreated int64
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
	id, err := r.FakeRuntimeService.CreateContainer(ctx, sandboxID, config, sandboxConfig)
	if err != nil {
		return id, err
	}
	// The fake stamps a container with time.Now, which stands still in a
	// synctest bubble until every goroutine waits: a restart would tie
	// with the run it replaces. A runtime's creation stamps only grow.
	r.FakeRuntimeService.Lock()
	defer r.FakeRuntimeService.Unlock()
	if c := r.Containers[id]; c != nil {
		c.CreatedAt = max(c.CreatedAt, r.lastCreated+1)
		r.lastCreated = c.CreatedAt
	}
	return id, nil
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
	name, ns, uid := labels[criconfig.LabelPodName], labels[criconfig.LabelPodNamespace], labels[criconfig.LabelPodUID]
	other := func(l map[string]string) bool {
		return l[criconfig.LabelPodName] == name && l[criconfig.LabelPodNamespace] == ns && l[criconfig.LabelPodUID] != uid
	}
	var found []string
	r.FakeRuntimeService.Lock()
	for _, s := range r.Sandboxes {
		if other(s.Labels) && s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			found = append(found, "sandbox of uid "+s.Labels[criconfig.LabelPodUID]+" ready")
		}
	}
	for _, c := range r.Containers {
		if other(c.Labels) && c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			found = append(found, "container of uid "+c.Labels[criconfig.LabelPodUID]+" "+c.State.String())
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
		if c.Labels[criconfig.LabelPodUID] == string(uid) && c.Metadata.Name == name {
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
		uid = types.UID(c.Labels[criconfig.LabelPodUID])
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
		if c.Labels[criconfig.LabelPodUID] == string(uid) && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
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
		if c.Labels[criconfig.LabelPodUID] == string(uid) {
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
		if c.Labels[criconfig.LabelPodUID] == string(uid) && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			c.State = runtimeapi.ContainerState_CONTAINER_EXITED
			c.ExitCode = code
			c.FinishedAt = at.UnixNano()
		}
	}
}

// ranBefore brings p up in a first berth on rt and stops that berth, as a
// restart of berth finds the runtime: the pod's objects stay. It returns
// the first berth's clock time at its stop.
func ranBefore(t *testing.T, rt *recordingRuntime, p *v1.Pod) time.Time {
	t.Helper()
	first := newHarness(t, harnessOpts{rt: rt})
	first.apply(podspec.SourceFile, p)
	first.eventually(p.Name+" running", func() bool { n, _ := rt.running(p.UID); return n == 1 })
	first.stop()
	return first.clock.Now()
}

// resetCalls forgets the calls the fake saw, so a test counts only its own.
func (r *recordingRuntime) resetCalls() {
	r.FakeRuntimeService.Lock()
	r.Called = nil
	r.FakeRuntimeService.Unlock()
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
