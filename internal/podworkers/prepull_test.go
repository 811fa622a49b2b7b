package podworkers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/podtest"
)

// pullingRuntime is a stubRuntime whose PrePull waits for the test's
// answer on results, recording each call and each pre-pull cut short.
type pullingRuntime struct {
	*stubRuntime
	results chan kuberuntime.PrePullResult

	mu        sync.Mutex // guards the fields below
	calls     []types.UID
	cancelled []types.UID
}

func (r *pullingRuntime) PrePull(ctx context.Context, pod *v1.Pod, pulling func([]string)) kuberuntime.PrePullResult {
	r.mu.Lock()
	r.calls = append(r.calls, pod.UID)
	r.mu.Unlock()
	pulling([]string{pod.Spec.Containers[0].Image})
	select {
	case res := <-r.results:
		return res
	case <-ctx.Done():
		r.mu.Lock()
		r.cancelled = append(r.cancelled, pod.UID)
		r.mu.Unlock()
		return kuberuntime.PrePullResult{Needed: 1, Failed: []kuberuntime.PrePullFailure{{Image: "x", Containers: []string{"app"},
			Err: &kuberuntime.SyncError{Reason: kuberuntime.ReasonErrImagePull, Message: "cancelled"}}}}
	}
}

func (r *pullingRuntime) prePulls() (calls, cancelled []types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls), slices.Clone(r.cancelled)
}

func (r *pullingRuntime) isLive(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live[uid]
}

// eventLog records the workers' events as "uid reason message".
type eventLog struct {
	mu  sync.Mutex
	all []string
}

func (l *eventLog) Event(uid types.UID, _, _ string, _ kuberuntime.EventType, reason, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, string(uid)+" "+reason+" "+msg)
}

func (l *eventLog) has(uid types.UID, reason string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.all, func(e string) bool { return strings.HasPrefix(e, string(uid)+" "+reason+" ") })
}

var (
	pulled     = kuberuntime.PrePullResult{Needed: 1, Pulled: 1, Pulling: time.Second}
	pullFailed = kuberuntime.PrePullResult{Needed: 1, RetryAfter: 10 * time.Second, Failed: []kuberuntime.PrePullFailure{{
		Image: "registry.test/app:2", Containers: []string{"app"},
		Err: &kuberuntime.SyncError{Reason: kuberuntime.ReasonErrImagePull, Message: `Failed to pull image "registry.test/app:2": not found`},
	}}}
)

// prePullBed is old (uid "old") running, replaced by an edit whose new
// version (uid "new") is pre-pulling.
type prePullBed struct {
	t      *testing.T
	rt     *pullingRuntime
	w      *Workers
	clk    podtest.AsyncClock
	events *eventLog
}

func (b *prePullBed) answer(res kuberuntime.PrePullResult) {
	b.rt.results <- res
}

// TestPodWorkersPullBeforeStop: a replaced pod keeps running while the new
// version of its full name pulls its images, and stops only once they are
// there; a failed pull, a revert, a newer edit or a removal each leave it
// as the rule says.
func TestPodWorkersPullBeforeStop(t *testing.T) {
	tests := []struct {
		name string
		// then acts once the new version's pre-pull waits, the old one
		// running; it returns the UID that must run in the end.
		then func(b *prePullBed) types.UID
	}{
		{
			name: "pull succeeds: the old version stops, the new one starts",
			then: func(b *prePullBed) types.UID {
				b.answer(pulled)
				waitUntil(b.t, "the pre-pulled event", func() bool { return b.events.has("new", ReasonPulledBeforeStop) })
				return "new"
			},
		},
		{
			name: "pull fails: the old version runs on, the problem is shown, the retry comes with the back-off",
			then: func(b *prePullBed) types.UID {
				b.answer(pullFailed)
				waitUntil(b.t, "the failure shown on the new version", func() bool {
					st := b.w.status.Get("new")
					return st != nil && st.Status.Reason == ReasonPullBeforeStopFailed && b.events.has("new", ReasonPullBeforeStopFailed)
				})
				st := b.w.status.Get("new").Status
				if !strings.Contains(st.Message, "old version (uid old) keeps running") || !strings.Contains(st.Message, "not found") {
					b.t.Errorf("status message %q does not say the old version runs on and why", st.Message)
				}
				i := slices.IndexFunc(st.Conditions, func(c v1.PodCondition) bool { return c.Type == ConditionPulledBeforeStop })
				if i < 0 || st.Conditions[i].Status != v1.ConditionFalse || st.Conditions[i].Reason != kuberuntime.ReasonErrImagePull {
					b.t.Errorf("conditions %+v, want %s False with reason ErrImagePull", st.Conditions, ConditionPulledBeforeStop)
				}
				if cs := st.ContainerStatuses; len(cs) != 1 || cs[0].State.Waiting == nil || cs[0].State.Waiting.Reason != kuberuntime.ReasonErrImagePull {
					b.t.Errorf("container statuses %+v, want app waiting with ErrImagePull", cs)
				}
				if !b.rt.isLive("old") || b.rt.removeCalls() != 0 {
					b.t.Fatal("the old version stopped although the new one has no images")
				}
				b.clk.Step(10*time.Second - time.Millisecond)
				synctest.Wait()
				if calls, _ := b.rt.prePulls(); len(calls) != 1 {
					b.t.Fatalf("%d pre-pulls before the back-off ended, want 1", len(calls))
				}
				b.clk.Step(time.Millisecond)
				waitUntil(b.t, "the retry when the back-off ends", func() bool { calls, _ := b.rt.prePulls(); return len(calls) == 2 })
				b.answer(pulled)
				return "new"
			},
		},
		{
			name: "image absent with policy Never: the old version runs on, the retries back off",
			then: func(b *prePullBed) types.UID {
				neverPull := kuberuntime.PrePullResult{Needed: 1, Failed: []kuberuntime.PrePullFailure{{Image: "app:2", Containers: []string{"app"},
					Err: &kuberuntime.SyncError{Reason: kuberuntime.ReasonErrImageNeverPull, Message: `Container image "app:2" is not present with pull policy of Never`}}}}
				b.answer(neverPull)
				for i, wait := range []time.Duration{prePullRetryInitial, 2 * prePullRetryInitial} {
					waitUntil(b.t, "the failure shown", func() bool {
						st := b.w.status.Get("new")
						return st != nil && st.Status.Reason == ReasonPullBeforeStopFailed
					})
					b.clk.Step(wait - time.Millisecond)
					synctest.Wait()
					if calls, _ := b.rt.prePulls(); len(calls) != i+1 || !b.rt.isLive("old") {
						b.t.Fatalf("%d pre-pulls %s into a %s back-off (old running %v), want %d", len(calls), wait-time.Millisecond, wait, b.rt.isLive("old"), i+1)
					}
					b.clk.Step(time.Millisecond)
					waitUntil(b.t, "the retry", func() bool { calls, _ := b.rt.prePulls(); return len(calls) == i+2 })
					if i == 0 {
						b.answer(neverPull)
					}
				}
				b.answer(pulled) // the image was loaded by hand meanwhile
				return "new"
			},
		},
		{
			name: "edit reverted during the pull: the old version runs on untouched",
			then: func(b *prePullBed) types.UID {
				b.w.Replace("new")
				b.w.Update(stubPod("old", "web", "1"))
				waitUntil(b.t, "the new version's pre-pull cut short and its lane gone", func() bool {
					_, cancelled := b.rt.prePulls()
					return len(cancelled) == 1 && !b.w.Known("new")
				})
				b.clk.Step(time.Hour) // past any wait for a new version
				synctest.Wait()
				return "old"
			},
		},
		{
			name: "manifest removed during the pull: both versions stop",
			then: func(b *prePullBed) types.UID {
				b.w.Remove("new", nil)
				waitUntil(b.t, "the old version removed", func() bool { return !b.rt.isLive("old") && !b.w.Known("old") })
				if _, cancelled := b.rt.prePulls(); len(cancelled) != 1 {
					b.t.Errorf("pre-pulls cut short %v, want the new version's", cancelled)
				}
				return ""
			},
		},
		{
			name: "a second edit during the pull: only the latest pulls, then replaces the old version",
			then: func(b *prePullBed) types.UID {
				b.w.Replace("new")
				b.w.Update(stubPod("newer", "web", "3"))
				waitUntil(b.t, "the newer version pre-pulling, the first one's pull cut short", func() bool {
					calls, cancelled := b.rt.prePulls()
					return len(calls) == 2 && calls[1] == "newer" && len(cancelled) == 1 && cancelled[0] == "new"
				})
				if !b.rt.isLive("old") {
					b.t.Fatal("the old version stopped before the latest version had its images")
				}
				b.answer(pulled)
				return "newer"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			synctest.Test(t, func(t *testing.T) {
				rt := &pullingRuntime{stubRuntime: newStubRuntime(), results: make(chan kuberuntime.PrePullResult)}
				events := &eventLog{}
				ctx, cancel := context.WithCancel(context.Background())
				w := newTestWorkersWith(ctx, workerOptions{rt: rt, recorder: events})
				b := &prePullBed{t: t, rt: rt, w: w, clk: w.clock.(podtest.AsyncClock), events: events}
				w.Update(stubPod("old", "web", "1"))
				waitUntil(t, "the old version running", func() bool { return rt.isLive("old") })

				w.Replace("old")
				w.Update(stubPod("new", "web", "2"))
				waitUntil(t, "the new version pre-pulling, the old one running", func() bool {
					st := w.status.Get("new")
					return st != nil && st.Status.Reason == ReasonPullingBeforeStop && rt.isLive("old") && events.has("new", ReasonPullingBeforeStop)
				})
				if rt.removeCalls() != 0 {
					t.Fatal("the old version was removed before the new one had its images")
				}
				want := tt.then(b)
				for _, uid := range []types.UID{"old", "new", "newer"} {
					waitUntil(t, "only the right version runs", func() bool { return rt.isLive(uid) == (uid == want) })
				}
				cancel()
				w.wait()
			})
		})
	}
}

// TestPodWorkersReplacedStopsWithoutSuccessor: a replaced pod that no new
// version comes for stops once replaceUnwaited has passed, not before.
func TestPodWorkersReplacedStopsWithoutSuccessor(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt := &pullingRuntime{stubRuntime: newStubRuntime(), results: make(chan kuberuntime.PrePullResult)}
		ctx, cancel := context.WithCancel(context.Background())
		w := newTestWorkers(ctx, rt)
		clk := w.clock.(podtest.AsyncClock)
		w.Update(stubPod("old", "web", "1"))
		waitUntil(t, "running", func() bool { return rt.isLive("old") })
		w.Replace("old")
		if _, active := w.Count(); active != 0 {
			t.Errorf("a replaced pod counts as active against max-pods (%d)", active)
		}
		clk.Step(replaceUnwaited - time.Millisecond)
		synctest.Wait()
		if !rt.isLive("old") {
			t.Fatal("stopped before replaceUnwaited")
		}
		clk.Step(time.Millisecond)
		waitUntil(t, "removed once replaceUnwaited passed", func() bool { return !rt.isLive("old") && !w.Known("old") })
		cancel()
		w.wait()
	})
}

// TestPodWorkersOrphanWaitsForPrePull: after a restart during a pre-pull
// the old version is an orphan holding its full name; it is stopped only
// once the new version has its images, whether its orphan lane or the new
// version's lane comes first.
func TestPodWorkersOrphanWaitsForPrePull(t *testing.T) {
	for _, orphanFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("orphan first %v", orphanFirst), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			synctest.Test(t, func(t *testing.T) {
				rt := &pullingRuntime{stubRuntime: newStubRuntime(), results: make(chan kuberuntime.PrePullResult)}
				ctx, cancel := context.WithCancel(context.Background())
				w := newTestWorkers(ctx, rt)
				orphan := &podplan.PodStatus{UID: "old", Name: "web", Namespace: "default",
					Containers: []*podplan.ContainerStatus{{ID: "c1", Name: "app", State: podplan.ContainerStateRunning}}}
				w.Hold(map[types.UID]*podplan.PodStatus{"old": orphan})
				if orphanFirst {
					w.TerminateOrphan(orphan, true)
				}
				w.Update(stubPod("new", "web", "2"))
				waitUntil(t, "the new version pre-pulling", func() bool { calls, _ := rt.prePulls(); return len(calls) == 1 })
				if !orphanFirst {
					w.TerminateOrphan(orphan, true)
				}
				synctest.Wait()
				if rt.removeCalls() != 0 {
					t.Fatal("the orphan was stopped while the new version pulled its images")
				}
				rt.results <- pulled
				waitUntil(t, "the orphan removed and the new version running", func() bool {
					return rt.removeCalls() == 1 && rt.isLive("new")
				})
				cancel()
				w.wait()
			})
		})
	}
}
