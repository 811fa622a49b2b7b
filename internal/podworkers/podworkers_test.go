package podworkers

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/podstatus"
	"github.com/berth-agent/berth/internal/podtest"
)

// stubRuntime is an instant in-memory Runtime that records the pods
// SyncPod was given; a non-nil block makes SyncPod wait on it once.
type stubRuntime struct {
	mu      sync.Mutex // guards the fields below
	synced  []string   // resourceVersion of each pod SyncPod saw
	live    map[types.UID]bool
	block   chan struct{}
	entered chan struct{}
	// syncErr is the error SyncPod reports, with no back-off of its own.
	syncErr error
	// removeErr is the error RemovePod reports; removes counts its calls.
	removeErr error
	removes   int
}

func newStubRuntime() *stubRuntime { return &stubRuntime{live: map[types.UID]bool{}} }

func (s *stubRuntime) PlanPod(pod *v1.Pod, status *podplan.PodStatus, health podplan.ContainerHealth) podplan.PodActions {
	return podplan.ComputePodActions(pod, status, health)
}

func (s *stubRuntime) SyncPod(_ context.Context, pod *v1.Pod, _ *podplan.PodStatus, plan *podplan.PodActions, _ kuberuntime.SyncOptions) kuberuntime.SyncResult {
	if plan == nil { // as the runtime manager answers it
		return kuberuntime.SyncResult{Results: []kuberuntime.ActionResult{{Action: kuberuntime.ActionSyncPod, Target: pod.Name, Err: kuberuntime.ErrNoPlan}}}
	}
	s.mu.Lock()
	s.synced = append(s.synced, pod.ResourceVersion)
	s.live[pod.UID] = true
	block, entered, syncErr := s.block, s.entered, s.syncErr
	s.block = nil
	s.mu.Unlock()
	if block != nil {
		close(entered)
		<-block
	}
	if syncErr != nil {
		return kuberuntime.SyncResult{Results: []kuberuntime.ActionResult{{Action: kuberuntime.ActionStartContainer, Target: "app", Err: syncErr}}}
	}
	return kuberuntime.SyncResult{}
}

func (s *stubRuntime) syncs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.synced)
}

func (s *stubRuntime) PrePull(context.Context, *v1.Pod, func([]string)) kuberuntime.PrePullResult {
	return kuberuntime.PrePullResult{}
}

func (s *stubRuntime) KillPod(context.Context, *v1.Pod, *podplan.PodStatus, *int64) error {
	return nil
}

func (s *stubRuntime) RemovePod(_ context.Context, st *podplan.PodStatus) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removes++
	if s.removeErr != nil {
		return s.removeErr
	}
	delete(s.live, st.UID)
	return nil
}

// allowRemoval makes RemovePod succeed from now on.
func (s *stubRuntime) allowRemoval() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeErr = nil
}

// syncedAgain reports whether the pod was synced twice, the second time
// at version v: it came back.
func (s *stubRuntime) syncedAgain(v string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.synced) == 2 && s.synced[1] == v
}

func (s *stubRuntime) removeCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removes
}

func (s *stubRuntime) PodStatus(_ context.Context, uid types.UID) (*podplan.PodStatus, error) {
	return &podplan.PodStatus{UID: uid}, nil
}

func (s *stubRuntime) Relist(context.Context) (map[types.UID]*podplan.PodStatus, error) {
	return map[types.UID]*podplan.PodStatus{}, nil
}

func (s *stubRuntime) CleanupPodDir(types.UID) error { return nil }

func (s *stubRuntime) ForgetStaleBackoffs() {}

func stubPod(uid types.UID, name, version string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: uid, Name: name, Namespace: "default", ResourceVersion: version},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "app", Image: "busybox:1.36"}}},
	}
}

func newTestWorkers(ctx context.Context, rt Runtime) *Workers {
	return newTestWorkersWith(ctx, workerOptions{rt: rt})
}

// newTestWorkersWith builds lanes from opts, with the test clock, status
// store, host IP, logger and four start slots where opts leaves them zero;
// they stop with ctx.
func newTestWorkersWith(ctx context.Context, opts workerOptions) *Workers {
	if opts.clock == nil {
		opts.clock = podtest.NewAsyncClock(clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	}
	if opts.status == nil {
		opts.status = podstatus.NewStore()
	}
	if opts.hostIP == "" {
		opts.hostIP = "192.0.2.10"
	}
	if opts.maxStarts == 0 {
		opts.maxStarts = 4
	}
	if opts.log == nil {
		opts.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	w := newWorkers(opts)
	context.AfterFunc(ctx, w.cancel)
	return w
}

// waitUntil waits until every goroutine of the test's synctest bubble is
// parked (on a channel, a fake-clock timer or the test) and checks that
// cond holds then: nothing changes any more until the test acts.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	synctest.Wait()
	if !cond() {
		t.Fatalf("not so once every goroutine waits: %s", what)
	}
}

func TestPodWorkersLatestUpdateWins(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt := newStubRuntime()
		rt.block, rt.entered = make(chan struct{}), make(chan struct{})
		release := rt.block
		ctx, cancel := context.WithCancel(context.Background())
		w := newTestWorkers(ctx, rt)

		w.Update(stubPod("u1", "web", "1"))
		<-rt.entered
		for _, v := range []string{"2", "3", "4"} {
			w.Update(stubPod("u1", "web", v))
		}
		close(release)
		waitUntil(t, "the latest update synced", func() bool {
			rt.mu.Lock()
			defer rt.mu.Unlock()
			return len(rt.synced) > 0 && rt.synced[len(rt.synced)-1] == "4"
		})
		rt.mu.Lock()
		got := append([]string(nil), rt.synced...)
		rt.mu.Unlock()
		if len(got) != 2 || got[0] != "1" || got[1] != "4" {
			t.Errorf("SyncPod saw versions %v; updates queued behind a busy lane must coalesce into the latest (want [1 4])", got)
		}
		cancel()
		w.wait()
	})
}

func TestPodWorkersLanesRunConcurrently(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt := newStubRuntime()
		rt.block, rt.entered = make(chan struct{}), make(chan struct{})
		release := rt.block
		ctx, cancel := context.WithCancel(context.Background())
		w := newTestWorkers(ctx, rt)
		w.Update(stubPod("slow", "slow", "1"))
		<-rt.entered
		w.Update(stubPod("fast", "fast", "1"))
		waitUntil(t, "another pod synced while the first is blocked", func() bool {
			return w.status.Get("fast") != nil
		})
		close(release)
		cancel()
		w.wait()
	})
}

func TestPodWorkersNoLeaksOverAddRemoveCycles(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt := newStubRuntime()
		ctx, cancel := context.WithCancel(context.Background())
		w := newTestWorkers(ctx, rt)
		const cycles = 3000
		for i := range cycles {
			uid := types.UID("uid-" + string(rune('a'+i%26)) + time.Duration(i).String())
			w.Update(stubPod(uid, "web", "1"))
			w.Remove(uid, nil)
		}
		waitUntil(t, "every lane closed", func() bool { all, _ := w.Count(); return all == 0 })
		w.mu.Lock()
		gateState := len(w.gate.started) + len(w.gate.waiting)
		w.mu.Unlock()
		if gateState != 0 || len(w.status.List()) != 0 {
			t.Errorf("after %d add/remove cycles: gate entries %d, statuses %d; want 0", cycles, gateState, len(w.status.List()))
		}
		rt.mu.Lock()
		live := len(rt.live)
		rt.mu.Unlock()
		if live != 0 {
			t.Errorf("%d pods left in the runtime", live)
		}
		w.ForgetFinished(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
		if len(w.finished) != 0 {
			t.Errorf("finished records not forgotten: %d", len(w.finished))
		}
		cancel()
		w.wait()
	})
}

// laneGoroutines counts the goroutines running a lane's steps, in every
// Workers of the process: this package's tests run one at a time.
func laneGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "podworkers.(*Workers).run(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestPodWorkersIdleLanesKeepNoGoroutine: a lane runs a goroutine while it
// has work and none once it waits for the next wake-up, which starts one
// again; a lane that ended, and every lane once the workers stop, starts
// none on a late wake-up (a timer's that fired as it was stopped).
func TestPodWorkersIdleLanesKeepNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt := newStubRuntime()
		ctx, cancel := context.WithCancel(context.Background())
		w := newTestWorkers(ctx, rt)
		uids := []types.UID{"u1", "u2", "u3"}
		for _, uid := range uids {
			w.Update(stubPod(uid, string(uid), "1"))
		}
		waitUntil(t, "every pod synced", func() bool { return rt.syncs() == len(uids) })
		if n := laneGoroutines(); n != 0 {
			t.Fatalf("%d lane goroutines with every lane idle, want 0", n)
		}

		rt.block, rt.entered = make(chan struct{}), make(chan struct{})
		release := rt.block
		w.Wake("u2")
		<-rt.entered
		if n := laneGoroutines(); n != 1 {
			t.Errorf("%d lane goroutines while one lane syncs, want 1", n)
		}
		close(release)
		waitUntil(t, "the woken lane synced again", func() bool { return rt.syncs() == len(uids)+1 })
		if n := laneGoroutines(); n != 0 {
			t.Errorf("%d lane goroutines once the woken lane is idle again, want 0", n)
		}

		w.mu.Lock()
		ended := w.workers["u1"]
		w.mu.Unlock()
		w.Remove("u1", nil)
		waitUntil(t, "u1's lane ended", func() bool { return !w.Known("u1") })
		removes := rt.removeCalls()
		w.mu.Lock()
		w.wakeLocked(ended)
		w.mu.Unlock()
		synctest.Wait()
		if n := laneGoroutines(); n != 0 || rt.removeCalls() != removes || rt.syncs() != len(uids)+1 {
			t.Errorf("a wake-up of an ended lane: %d lane goroutines, %d removals and %d syncs, want 0, %d and %d", n, rt.removeCalls(), rt.syncs(), removes, len(uids)+1)
		}

		cancel()
		w.wait()
		u3 := w.workers["u3"]
		w.mu.Lock()
		w.wakeLocked(u3)
		started := u3.active
		w.mu.Unlock()
		synctest.Wait()
		if n := laneGoroutines(); started || n != 0 || rt.syncs() != len(uids)+1 {
			t.Errorf("a wake-up after Stop: started %v, %d lane goroutines and %d syncs, want false, 0 and %d", started, n, rt.syncs(), len(uids)+1)
		}
	})
}

// TestPodWorkersRetryAfterErrorWaitsItsInterval: a sync that failed without
// a back-off of its own is retried exactly retryAfterError later, on the
// lane's timer: not 1 ms before, and at that moment. Without the sync loop
// nothing else wakes the lane, and it armed its timer before its step
// counted, so the clock's waiters say when it is idle.
func TestPodWorkersRetryAfterErrorWaitsItsInterval(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt := newStubRuntime()
		rt.syncErr = errors.New("create container: boom")
		ctx, cancel := context.WithCancel(context.Background())
		w := newTestWorkers(ctx, rt)
		clk := w.clock.(podtest.AsyncClock)
		w.Update(stubPod("u1", "web", "1"))
		for i := 1; i <= 3; i++ {
			waitUntil(t, "the failed sync and its retry timer", func() bool { return rt.syncs() == i && clk.Waiters() == 1 })
			fired := clk.Fired.Load()
			clk.Step(w.retryAfterError - time.Millisecond)
			if clk.Fired.Load() != fired || rt.syncs() != i {
				t.Fatalf("the retry timer fired %s after a failure, want it only at %s", w.retryAfterError-time.Millisecond, w.retryAfterError)
			}
			clk.Step(time.Millisecond)
			waitUntil(t, "the retry", func() bool { return rt.syncs() == i+1 })
		}
		cancel()
		w.wait()
	})
}

// removalRefused runs pod u1, then removes it from a runtime that refuses
// to remove it. onTerminated, when not nil, is set before any lane runs.
func removalRefused(t *testing.T, onTerminated func(types.UID)) (*stubRuntime, *Workers, podtest.AsyncClock, context.CancelFunc) {
	t.Helper()
	rt, w, clk, cancel := runningOnRefusingRuntime(t, onTerminated)
	w.Remove("u1", nil)
	return rt, w, clk, cancel
}

// runningOnRefusingRuntime runs pod u1 on a runtime that refuses to remove
// it. onTerminated, when not nil, is set before any lane runs.
func runningOnRefusingRuntime(t *testing.T, onTerminated func(types.UID)) (*stubRuntime, *Workers, podtest.AsyncClock, context.CancelFunc) {
	t.Helper()
	rt := newStubRuntime()
	rt.removeErr = errors.New("remove sandbox: network namespace not closed")
	ctx, cancel := context.WithCancel(context.Background())
	w := newTestWorkersWith(ctx, workerOptions{rt: rt, onTerminated: onTerminated})
	w.Update(stubPod("u1", "web", "1"))
	waitUntil(t, "the pod synced", func() bool { return rt.syncs() == 1 })
	return rt, w, w.clock.(podtest.AsyncClock), cancel
}

// TestPodWorkersRemoveRetriesBackOff: a runtime that refuses to remove a
// stopped pod (containerd 1.6 cannot remove a sandbox whose network it
// cannot tear down, possibly for good) is asked again after 1, 2, 4, ...
// up to 30 s, not every 2 s forever; and once it succeeds the lane ends.
func TestPodWorkersRemoveRetriesBackOff(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt, w, clk, cancel := removalRefused(t, nil)
		want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
		for i, d := range want {
			d *= time.Second
			waitUntil(t, "a failed removal and its retry timer", func() bool { return rt.removeCalls() == i+1 && clk.Waiters() == 1 })
			fired := clk.Fired.Load()
			clk.Step(d - time.Millisecond)
			if clk.Fired.Load() != fired {
				t.Fatalf("retry %d came before %s", i+1, d)
			}
			if i == len(want)-1 {
				rt.allowRemoval()
			}
			clk.Step(time.Millisecond)
		}
		waitUntil(t, "the lane ended once the removal succeeded", func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.workers) == 0
		})
		cancel()
		w.wait()
	})
}

// TestPodWorkersReleasedReplacedRetriesOnBackOff: a replaced pod that its
// own lane releases (no new version came within replaceUnwaited) and whose
// removal fails is asked again when the back-off ends, not at once: the
// release inside the lane's step is no second wake-up of that lane.
func TestPodWorkersReleasedReplacedRetriesOnBackOff(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt, w, clk, cancel := runningOnRefusingRuntime(t, nil)
		w.Replace("u1")
		clk.Step(replaceUnwaited)
		waitUntil(t, "one failed removal and its retry timer", func() bool { return rt.removeCalls() == 1 && clk.Waiters() == 1 })
		clk.Step(time.Second - time.Millisecond)
		synctest.Wait()
		if n := rt.removeCalls(); n != 1 {
			t.Fatalf("%d removals before the 1s back-off ended, want 1", n)
		}
		clk.Step(time.Millisecond)
		waitUntil(t, "the retry when the back-off ends", func() bool { return rt.removeCalls() == 2 })
		cancel()
		w.wait()
	})
}

// TestPodWorkersReaddWhileRemovalFails: a pod removed and then added back
// with the same UID runs again although the runtime still refuses to
// Remove what its stopped run left: its new run takes over.
func TestPodWorkersReaddWhileRemovalFails(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt, w, clk, cancel := removalRefused(t, nil)
		waitUntil(t, "a failed removal and its retry timer", func() bool { return rt.removeCalls() == 1 && clk.Waiters() == 1 })
		w.Update(stubPod("u1", "web", "2"))
		clk.Step(time.Second)
		waitUntil(t, "the pod back and synced", func() bool { return rt.syncedAgain("2") })
		if n := rt.removeCalls(); n != 2 {
			t.Errorf("%d removals, want the one that failed before the pod came back and the one that handed over", n)
		}
		cancel()
		w.wait()
	})
}

// TestPodWorkersObservationOnlyNewer: a relist that began before the
// lane's own read must not replace it when it arrives later, and on a tie
// the lane's own read (taken after its action) wins. When the two reads
// may overlap (one was handed over after the other began) and show
// different states, the one kept may be the older: it is marked stale.
func TestPodWorkersObservationOnlyNewer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	state := func(name string, st podplan.ContainerState) *podplan.PodStatus {
		return &podplan.PodStatus{Name: name, Containers: []*podplan.ContainerStatus{{ID: "c1", State: st}}}
	}
	relist, own := state("relist", podplan.ContainerStateRunning), state("own", podplan.ContainerStateRunning)
	exited := state("relist", podplan.ContainerStateExited)
	for _, tc := range []struct {
		name             string
		first            *podplan.PodStatus
		firstAt          time.Time
		next             *podplan.PodStatus
		nextAt, nextRecv time.Time
		want             string
		wantStale        bool
	}{
		{"newer relist replaces own read", own, t0, relist, t0.Add(ms), t0.Add(2 * ms), "relist", false},
		{"older relist keeps own read", own, t0, relist, t0.Add(-ms), t0.Add(ms), "own", false},
		{"relist tying own read keeps it", own, t0, relist, t0, t0.Add(ms), "own", false},
		{"own read tying relist replaces it", relist, t0, own, t0, t0.Add(ms), "own", false},
		{"older own read keeps relist", relist, t0, own, t0.Add(-ms), t0.Add(ms), "relist", false},
		{"older relist seeing an exit marks the own read stale", own, t0, exited, t0.Add(-ms), t0.Add(ms), "own", true},
		{"newer relist seeing an exit replaces the own read", own, t0, exited, t0.Add(ms), t0.Add(2 * ms), "relist", false},
		{"older relist finding the pod gone marks the own read stale", own, t0, nil, t0.Add(-ms), t0.Add(ms), "own", true},
		{"own read replacing a relist handed over after it began is stale", exited, t0.Add(-2 * ms), own, t0, t0.Add(ms), "own", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, w := &Workers{}, &podWorker{}
			// The first read was handed over a moment after it began,
			// before the next one began, except in the last case.
			firstRecv := tc.firstAt
			if tc.wantStale && tc.next == own {
				firstRecv = tc.nextAt.Add(ms / 2)
			}
			p.recordLocked(w, tc.first, tc.firstAt, firstRecv, tc.first == own)
			stale := p.recordLocked(w, tc.next, tc.nextAt, tc.nextRecv, tc.next == own)
			if w.observed.Name != tc.want {
				t.Errorf("observation = %s, want %s", w.observed.Name, tc.want)
			}
			if w.observedOwn != (tc.want == "own") {
				t.Errorf("observedOwn = %v for the %s observation", w.observedOwn, tc.want)
			}
			if stale != tc.wantStale || w.observedStale != tc.wantStale {
				t.Errorf("stale = %v (marked %v), want %v", stale, w.observedStale, tc.wantStale)
			}
		})
	}
}

// exitRuntime is a runtime whose pod has a ready sandbox and one container
// in the state the test sets; SyncPod reports an action on its first call
// only and records the container state each call was given.
type exitRuntime struct {
	stubRuntime
	mu    sync.Mutex // guards state, reads and seen
	state podplan.ContainerState
	reads int
	seen  []podplan.ContainerState
}

func (r *exitRuntime) status(uid types.UID) *podplan.PodStatus {
	return &podplan.PodStatus{UID: uid, IPs: []string{"10.0.0.2"},
		Sandboxes:  []*podplan.SandboxStatus{{ID: "sb", State: podplan.SandboxStateReady, IP: "10.0.0.2"}},
		Containers: []*podplan.ContainerStatus{{ID: "c1", Name: "app", SandboxID: "sb", State: r.state}}}
}

func (r *exitRuntime) PodStatus(_ context.Context, uid types.UID) (*podplan.PodStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	return r.status(uid), nil
}

func (r *exitRuntime) PlanPod(pod *v1.Pod, status *podplan.PodStatus, health podplan.ContainerHealth) podplan.PodActions {
	return podplan.ComputePodActions(pod, status, health)
}

func (r *exitRuntime) SyncPod(_ context.Context, pod *v1.Pod, st *podplan.PodStatus, _ *podplan.PodActions, _ kuberuntime.SyncOptions) kuberuntime.SyncResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, st.Containers[0].State)
	if len(r.seen) == 1 {
		return kuberuntime.SyncResult{Results: []kuberuntime.ActionResult{{Action: kuberuntime.ActionStartContainer, Target: "app"}}}
	}
	return kuberuntime.SyncResult{}
}

func (r *exitRuntime) syncsSeen() []podplan.ContainerState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]podplan.ContainerState(nil), r.seen...)
}

// TestPodWorkersExitSeenByAnOlderRelist: the lane acted and read the pod
// back (its container running); the container then exited, and the only
// relist that saw it began before the lane's action. Later relists see no
// change and deliver nothing, so that relist is the lane's one chance: it
// cannot replace the lane's newer read, but the lane must read the runtime
// again rather than sync from a container it still believes running.
func TestPodWorkersExitSeenByAnOlderRelist(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt := &exitRuntime{stubRuntime: *newStubRuntime(), state: podplan.ContainerStateRunning}
		ctx, cancel := context.WithCancel(context.Background())
		w := newTestWorkers(ctx, rt)
		w.rt = rt
		w.Update(stubPod("u1", "web", "1"))
		waitUntil(t, "the first sync and the lane's read after its action", func() bool {
			rt.mu.Lock()
			defer rt.mu.Unlock()
			return len(rt.seen) == 1 && rt.reads == 2
		})

		rt.mu.Lock()
		rt.state = podplan.ContainerStateExited
		exited := rt.status("u1")
		rt.mu.Unlock()
		w.Observe("u1", exited, w.clock.Now().Add(-time.Millisecond))

		waitUntil(t, "a second sync", func() bool { return len(rt.syncsSeen()) == 2 })
		if got := rt.syncsSeen()[1]; got != podplan.ContainerStateExited {
			t.Errorf("the second sync saw the container %s, want %s: the lane kept its own read over the exit", got, podplan.ContainerStateExited)
		}
		cancel()
		w.wait()
	})
}

// TestPodWorkersReaddedPodKeepsItsEvents: a lane whose removal ends after
// its pod was added back (a rollback to it, decided while its old run was
// still being removed) must not have the agent forget the pod's events,
// or the RolledBack event recorded on it is lost; a lane that ends for
// good still does.
func TestPodWorkersReaddedPodKeepsItsEvents(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		told := make(chan types.UID, 4)
		rt, w, clk, cancel := removalRefused(t, func(uid types.UID) { told <- uid })
		waitUntil(t, "a failed removal and its retry timer", func() bool { return rt.removeCalls() == 1 && clk.Waiters() == 1 })
		w.Update(stubPod("u1", "web", "2"))
		rt.allowRemoval()
		clk.Step(time.Second)
		waitUntil(t, "the pod back and synced", func() bool { return rt.syncedAgain("2") })
		w.Remove("u1", nil)
		waitUntil(t, "the pod removed for good", func() bool { return rt.removeCalls() == 3 })
		cancel()
		w.wait()
		if n := len(told); n != 1 {
			t.Errorf("told of %d terminations, want 1: the pod removed for good, not the run that ended while it was back", n)
		}
	})
}
