package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/cri"
)

// stubRuntime is an instant in-memory podRuntime that records the pods
// SyncPod was given; a non-nil block makes SyncPod wait on it once.
type stubRuntime struct {
	mu      sync.Mutex // guards the fields below
	synced  []string   // resourceVersion of each pod SyncPod saw
	live    map[types.UID]bool
	block   chan struct{}
	entered chan struct{}
	// syncErr is the error SyncPod reports, with no back-off of its own.
	syncErr error
}

func newStubRuntime() *stubRuntime { return &stubRuntime{live: map[types.UID]bool{}} }

func (s *stubRuntime) SyncPod(_ context.Context, pod *v1.Pod, _ *cri.PodStatus) cri.SyncResult {
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
		return cri.SyncResult{Results: []cri.ActionResult{{Action: cri.ActionStartContainer, Target: "app", Err: syncErr}}}
	}
	return cri.SyncResult{}
}

func (s *stubRuntime) syncs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.synced)
}

func (s *stubRuntime) KillPod(context.Context, *v1.Pod, *cri.PodStatus, *int64) error { return nil }

func (s *stubRuntime) RemovePod(_ context.Context, st *cri.PodStatus) error {
	s.mu.Lock()
	delete(s.live, st.UID)
	s.mu.Unlock()
	return nil
}

func (s *stubRuntime) PodStatus(_ context.Context, uid types.UID) (*cri.PodStatus, error) {
	return &cri.PodStatus{UID: uid}, nil
}

func (s *stubRuntime) Relist(context.Context) (map[types.UID]*cri.PodStatus, error) {
	return map[types.UID]*cri.PodStatus{}, nil
}

func (s *stubRuntime) CleanupPodDir(types.UID) error { return nil }

func (s *stubRuntime) ForgetStaleBackoffs() {}

func stubPod(uid types.UID, name, version string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: uid, Name: name, Namespace: "default", ResourceVersion: version},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "app", Image: "busybox:1.36"}}},
	}
}

func newTestWorkers(ctx context.Context, rt podRuntime) *podWorkers {
	clk := newAsyncClock(clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	return newPodWorkers(ctx, rt, clk, newStatusStore(), "192.0.2.10", 4, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPodWorkersLatestUpdateWins(t *testing.T) {
	defer goleak.VerifyNone(t)
	rt := newStubRuntime()
	rt.block, rt.entered = make(chan struct{}), make(chan struct{})
	release := rt.block
	ctx, cancel := context.WithCancel(context.Background())
	w := newTestWorkers(ctx, rt)

	w.update(stubPod("u1", "web", "1"))
	<-rt.entered
	for _, v := range []string{"2", "3", "4"} {
		w.update(stubPod("u1", "web", v))
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
}

func TestPodWorkersLanesRunConcurrently(t *testing.T) {
	defer goleak.VerifyNone(t)
	rt := newStubRuntime()
	rt.block, rt.entered = make(chan struct{}), make(chan struct{})
	release := rt.block
	ctx, cancel := context.WithCancel(context.Background())
	w := newTestWorkers(ctx, rt)
	w.update(stubPod("slow", "slow", "1"))
	<-rt.entered
	w.update(stubPod("fast", "fast", "1"))
	waitUntil(t, "another pod synced while the first is blocked", func() bool {
		return w.status.get("fast") != nil
	})
	close(release)
	cancel()
	w.wait()
}

func TestPodWorkersNoLeaksOverAddRemoveCycles(t *testing.T) {
	defer goleak.VerifyNone(t)
	rt := newStubRuntime()
	ctx, cancel := context.WithCancel(context.Background())
	w := newTestWorkers(ctx, rt)
	const cycles = 3000
	for i := range cycles {
		uid := types.UID("uid-" + string(rune('a'+i%26)) + time.Duration(i).String())
		w.update(stubPod(uid, "web", "1"))
		w.remove(uid, nil)
	}
	waitUntil(t, "every lane closed", func() bool { all, _ := w.count(); return all == 0 })
	w.mu.Lock()
	gateState := len(w.gate.started) + len(w.gate.waiting)
	w.mu.Unlock()
	if gateState != 0 || len(w.status.list()) != 0 {
		t.Errorf("after %d add/remove cycles: gate entries %d, statuses %d; want 0", cycles, gateState, len(w.status.list()))
	}
	rt.mu.Lock()
	live := len(rt.live)
	rt.mu.Unlock()
	if live != 0 {
		t.Errorf("%d pods left in the runtime", live)
	}
	w.forgetFinished(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	if len(w.finished) != 0 {
		t.Errorf("finished records not forgotten: %d", len(w.finished))
	}
	cancel()
	w.wait()
}

// TestPodWorkersRetryAfterErrorWaitsItsInterval: a sync that failed without
// a back-off of its own is retried exactly retryAfterError later, on the
// lane's timer: not 1 ms before, and at that moment. Without the sync loop
// nothing else wakes the lane, and it armed its timer before its step
// counted, so the clock's waiters say when it is idle.
func TestPodWorkersRetryAfterErrorWaitsItsInterval(t *testing.T) {
	defer goleak.VerifyNone(t)
	rt := newStubRuntime()
	rt.syncErr = errors.New("create container: boom")
	ctx, cancel := context.WithCancel(context.Background())
	w := newTestWorkers(ctx, rt)
	clk := w.clock.(asyncClock)
	w.update(stubPod("u1", "web", "1"))
	for i := 1; i <= 3; i++ {
		waitUntil(t, "the failed sync and its retry timer", func() bool { return rt.syncs() == i && clk.Waiters() == 1 })
		fired := clk.fired.Load()
		clk.Step(w.retryAfterError - time.Millisecond)
		if clk.fired.Load() != fired || rt.syncs() != i {
			t.Fatalf("the retry timer fired %s after a failure, want it only at %s", w.retryAfterError-time.Millisecond, w.retryAfterError)
		}
		clk.Step(time.Millisecond)
		waitUntil(t, "the retry", func() bool { return rt.syncs() == i+1 })
	}
	cancel()
	w.wait()
}

// TestPodWorkersObservationOnlyNewer: a relist that began before the
// lane's own read must not replace it when it arrives later, and on a tie
// the lane's own read (taken after its action) wins.
func TestPodWorkersObservationOnlyNewer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	relist, own := &cri.PodStatus{Name: "relist"}, &cri.PodStatus{Name: "own"}
	for _, tc := range []struct {
		name    string
		first   *cri.PodStatus
		firstAt time.Time
		next    *cri.PodStatus
		nextAt  time.Time
		want    string
	}{
		{"newer relist replaces own read", own, t0, relist, t0.Add(time.Millisecond), "relist"},
		{"older relist keeps own read", own, t0, relist, t0.Add(-time.Millisecond), "own"},
		{"relist tying own read keeps it", own, t0, relist, t0, "own"},
		{"own read tying relist replaces it", relist, t0, own, t0, "own"},
		{"older own read keeps relist", relist, t0, own, t0.Add(-time.Millisecond), "relist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, w := &podWorkers{}, &podWorker{}
			p.recordLocked(w, tc.first, tc.firstAt, tc.first == own)
			p.recordLocked(w, tc.next, tc.nextAt, tc.next == own)
			if w.observed.Name != tc.want {
				t.Errorf("observation = %s, want %s", w.observed.Name, tc.want)
			}
			if w.observedOwn != (tc.want == "own") {
				t.Errorf("observedOwn = %v for the %s observation", w.observedOwn, tc.want)
			}
		})
	}
}
