package syncloop

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/gc"
	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podplan"
)

// fakeGCRuntime records the GC loop's calls and answers from its fields;
// each call is also sent on calls so tests wait without sleeping.
type fakeGCRuntime struct {
	calls chan string

	mu         sync.Mutex // guards the fields below
	gcInputs   []gc.Input
	gcResult   gc.Result
	sweepKeep  func(types.UID) bool
	sweepOut   []gc.Removal
	rotatedIDs [][]string
	imagePods  []map[types.UID]*podplan.PodStatus
}

func (f *fakeGCRuntime) GarbageCollect(_ context.Context, in gc.Input) gc.Result {
	f.mu.Lock()
	f.gcInputs = append(f.gcInputs, in)
	res := f.gcResult
	f.mu.Unlock()
	f.calls <- "GarbageCollect"
	return res
}

func (f *fakeGCRuntime) SweepPodDirs(keep func(types.UID) bool) ([]gc.Removal, error) {
	f.mu.Lock()
	f.sweepKeep = keep
	out := f.sweepOut
	f.mu.Unlock()
	f.calls <- "SweepPodDirs"
	return out, nil
}

func (f *fakeGCRuntime) RotateLogs(_ context.Context, ids []string, _ gc.LogRotationPolicy) gc.LogRotationResult {
	f.mu.Lock()
	f.rotatedIDs = append(f.rotatedIDs, ids)
	f.mu.Unlock()
	f.calls <- "RotateLogs"
	return gc.LogRotationResult{Rotated: []string{"/logs/0.log"}}
}

func (f *fakeGCRuntime) ImageGarbageCollect(_ context.Context, _ gc.ImagePolicy, pods map[types.UID]*podplan.PodStatus, _ []string) gc.ImageResult {
	f.mu.Lock()
	f.imagePods = append(f.imagePods, pods)
	f.mu.Unlock()
	f.calls <- "ImageGarbageCollect"
	return gc.ImageResult{UsagePercent: 90, Removed: []gc.RemovedImage{{ID: "sha256:old", Size: 100}}, Freed: 100}
}

// next waits for the next call (a runaway test fails instead of hanging).
func (f *fakeGCRuntime) next(t *testing.T) string {
	t.Helper()
	select {
	case c := <-f.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no GC call")
		return ""
	}
}

type gcEnv struct {
	rt     *fakeGCRuntime
	clock  *clocktesting.FakeClock
	events *podevents.Log
	reg    *prometheus.Registry
	h      *gcLoop
	ready  bool
	mu     sync.Mutex // guards ready and pods
	pods   []*v1.Pod
	lanes  map[types.UID]bool
}

func newGCEnv(t *testing.T) *gcEnv {
	t.Helper()
	e := &gcEnv{
		rt:    &fakeGCRuntime{calls: make(chan string, 16)},
		clock: clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)),
		reg:   prometheus.NewRegistry(),
		lanes: map[types.UID]bool{},
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.events = podevents.New(e.clock, log)
	e.h = newGCLoop(e.rt, GCConfig{Containers: gc.DefaultPolicy, LogMonitorInterval: 10 * time.Second, ImagePeriod: 5 * time.Minute},
		gcPods{
			sourcesReady: func() bool { e.mu.Lock(); defer e.mu.Unlock(); return e.ready },
			desired:      func() []*v1.Pod { e.mu.Lock(); defer e.mu.Unlock(); return e.pods },
			hasWorker:    func(uid types.UID) bool { e.mu.Lock(); defer e.mu.Unlock(); return e.lanes[uid] },
		}, e.clock, log, e.events, e.reg)
	return e
}

// start runs the GC loop until the test ends, then checks that its
// goroutines are gone.
func (e *gcEnv) start(t *testing.T) {
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.h.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		goleak.VerifyNone(t, before)
	})
}

func TestGCLoopCollectsOnOffer(t *testing.T) {
	e := newGCEnv(t)
	web := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "web", Name: "web-node", Namespace: "default"},
		Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "setup"}}}}
	e.pods = []*v1.Pod{web}
	e.lanes["stopping"] = true
	e.rt.gcResult = gc.Result{Removed: []gc.Removal{
		{Kind: gc.KindContainer, UID: "web", Pod: "web-node", Namespace: "default", Container: "app", ID: "c1", Reason: gc.ReasonPerUnitCap, PodExists: true},
		{Kind: gc.KindContainer, UID: "web", Pod: "web-node", Namespace: "default", Container: "app", ID: "c2", Reason: gc.ReasonPerUnitCap, PodExists: true},
		{Kind: gc.KindContainer, UID: "gone", Pod: "gone-node", Namespace: "default", Container: "app", ID: "g1", Reason: gc.ReasonDeletedPod},
		{Kind: gc.KindSandbox, UID: "gone", Pod: "gone-node", Namespace: "default", ID: "s1", Reason: gc.ReasonDeletedPod},
	}}
	e.start(t)

	snap := map[types.UID]*podplan.PodStatus{"web": {UID: "web"}, "gone": {UID: "gone"}}
	e.h.offer(e.clock.Now(), snap)
	if c := e.rt.next(t); c != "GarbageCollect" {
		t.Fatalf("call %s", c)
	}
	e.rt.mu.Lock()
	in := e.rt.gcInputs[0]
	e.rt.mu.Unlock()
	if in.AllSourcesReady {
		t.Error("sources reported ready too early")
	}
	if !slices.Equal(in.InitContainers["web"], []string{"setup"}) {
		t.Errorf("init containers %v", in.InitContainers)
	}
	for uid, want := range map[types.UID]bool{"web": false, "stopping": false, "gone": true} {
		if got := in.PodDeleted(uid); got != want {
			t.Errorf("PodDeleted(%s) = %v, want %v", uid, got, want)
		}
	}
	if in.Policy != gc.DefaultPolicy {
		t.Errorf("policy %+v", in.Policy)
	}

	// Once sources are ready the first pass sweeps pod directories,
	// keeping what the runtime, the sources or a lane still have.
	e.mu.Lock()
	e.ready = true
	e.mu.Unlock()
	e.rt.mu.Lock()
	e.rt.gcResult = gc.Result{}
	e.rt.mu.Unlock()
	e.h.offer(e.clock.Now(), snap)
	if c := e.rt.next(t); c != "GarbageCollect" {
		t.Fatalf("call %s", c)
	}
	if c := e.rt.next(t); c != "SweepPodDirs" {
		t.Fatalf("call %s, want the sweep", c)
	}
	// The first pass with every source ready checks the image filesystem
	// too, as the kubelet does at start; later ones wait for its period.
	if c := e.rt.next(t); c != "ImageGarbageCollect" {
		t.Fatalf("call %s, want the first image pass", c)
	}

	// By now the first pass has reported (one goroutine does both).
	// The web pod shows one event for its two removed runs; the deleted
	// pod none (it is gone); every removal is counted.
	evs := e.events.List("web")
	if len(evs) != 1 || evs[0].Reason != "ContainerGC" || evs[0].Message != "Removed 2 dead runs of container app ("+gc.ReasonPerUnitCap+")" {
		t.Errorf("events %+v", evs)
	}
	if evs := e.events.List("gone"); len(evs) != 0 {
		t.Errorf("events of the deleted pod: %+v", evs)
	}
	if got := testutil.ToFloat64(e.h.metrics.removed.WithLabelValues("container")); got != 3 {
		t.Errorf("containers removed = %v", got)
	}
	if got := testutil.ToFloat64(e.h.metrics.removed.WithLabelValues("sandbox")); got != 1 {
		t.Errorf("sandboxes removed = %v", got)
	}

	e.rt.mu.Lock()
	keep := e.rt.sweepKeep
	e.rt.mu.Unlock()
	for uid, want := range map[types.UID]bool{"web": true, "gone": true, "stopping": true, "long-gone": false} {
		if got := keep(uid); got != want {
			t.Errorf("sweep keep(%s) = %v, want %v", uid, got, want)
		}
	}
	// The next pass within the sweep period does not sweep again, nor
	// check images before their period.
	e.h.offer(e.clock.Now(), snap)
	if c := e.rt.next(t); c != "GarbageCollect" {
		t.Fatalf("call %s", c)
	}
	select {
	case c := <-e.rt.calls:
		t.Errorf("unexpected %s", c)
	default:
	}
}

func TestGCLoopRotatesAndCollectsImagesOnTheirPeriods(t *testing.T) {
	e := newGCEnv(t)
	e.start(t)
	snap := map[types.UID]*podplan.PodStatus{"web": {UID: "web", Containers: []*podplan.ContainerStatus{
		{ID: "run", State: podplan.ContainerStateRunning}, {ID: "dead", State: podplan.ContainerStateExited},
	}}}
	e.h.offer(e.clock.Now(), snap)
	if c := e.rt.next(t); c != "GarbageCollect" {
		t.Fatalf("call %s", c)
	}
	e.clock.Step(10 * time.Second)
	if c := e.rt.next(t); c != "RotateLogs" {
		t.Fatalf("call %s", c)
	}
	e.rt.mu.Lock()
	ids := e.rt.rotatedIDs[0]
	e.rt.mu.Unlock()
	if !slices.Equal(ids, []string{"run"}) {
		t.Errorf("rotated %v, want the running container only", ids)
	}
	e.clock.Step(5 * time.Minute)
	var got []string
	for range 2 {
		got = append(got, e.rt.next(t))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"ImageGarbageCollect", "RotateLogs"}) {
		t.Errorf("calls %v", got)
	}
	// Each loop finishes a pass before it takes the next: the first
	// rotation is counted by now, and the image pass once another offer
	// is collected.
	if got := testutil.ToFloat64(e.h.metrics.rotations); got < 1 {
		t.Errorf("rotations = %v", got)
	}
	e.h.offer(e.clock.Now(), snap)
	if c := e.rt.next(t); c != "GarbageCollect" {
		t.Fatalf("call %s", c)
	}
	if got := testutil.ToFloat64(e.h.metrics.imagesRemoved); got != 1 {
		t.Errorf("images removed = %v", got)
	}
	if got := testutil.ToFloat64(e.h.metrics.imageFsUsage); got != 0.9 {
		t.Errorf("image fs usage ratio = %v, want 0.9", got)
	}
	if got := testutil.ToFloat64(e.h.metrics.imageFsUsagePercent); got != 90 {
		t.Errorf("image fs usage percent = %v, want 90 (deprecated)", got)
	}
	if got := testutil.ToFloat64(e.h.metrics.imageBytesFreed); got != 100 {
		t.Errorf("freed bytes = %v", got)
	}
}
