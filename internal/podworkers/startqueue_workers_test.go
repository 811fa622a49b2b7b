package podworkers

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/podtest"
)

// gatedRuntime is a Runtime whose SyncPod of a pod without a sandbox
// reports itself on entered and waits for proceed: the test decides when
// each start ends. A started pod has a ready sandbox, so its later syncs
// are no starts.
type gatedRuntime struct {
	stubRuntime
	entered chan types.UID
	proceed chan struct{}
	// hold, set before the test starts pods, keeps the starts of its pods
	// until the test closes their channel, instead of proceed.
	hold map[types.UID]chan struct{}
	// postStart, if set, has SyncPod call its BeforePostStart before it
	// reports itself, as the runtime manager tells the agent a postStart
	// hook is about to run.
	postStart bool

	mu     sync.Mutex // guards ready, killed, unreadable and dead
	ready  map[types.UID]bool
	killed []types.UID
	// unreadable are pods whose status the runtime fails to return.
	unreadable map[types.UID]bool
	// dead are pods left with a dead sandbox (NOTREADY) until started.
	dead map[types.UID]bool
}

func newGatedRuntime() *gatedRuntime {
	return &gatedRuntime{stubRuntime: *newStubRuntime(), entered: make(chan types.UID, 100), proceed: make(chan struct{}), ready: map[types.UID]bool{}}
}

func (g *gatedRuntime) PodStatus(_ context.Context, uid types.UID) (*podplan.PodStatus, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unreadable[uid] {
		return nil, errors.New("status unreadable")
	}
	if !g.ready[uid] && g.dead[uid] {
		return &podplan.PodStatus{UID: uid, Sandboxes: []*podplan.SandboxStatus{{ID: "dead-" + string(uid), State: podplan.SandboxStateNotReady,
			Labels: map[string]string{criconfig.LabelManaged: "true"}}}}, nil
	}
	if !g.ready[uid] {
		return &podplan.PodStatus{UID: uid}, nil
	}
	return &podplan.PodStatus{UID: uid, IPs: []string{"10.0.0.2"}, Sandboxes: []*podplan.SandboxStatus{{ID: "sb-" + string(uid), State: podplan.SandboxStateReady, IP: "10.0.0.2"}}}, nil
}

func (g *gatedRuntime) SyncPod(_ context.Context, pod *v1.Pod, status *podplan.PodStatus, _ *podplan.PodActions, opts kuberuntime.SyncOptions) kuberuntime.SyncResult {
	if len(status.Sandboxes) > 0 && status.Sandboxes[0].State == podplan.SandboxStateReady {
		return kuberuntime.SyncResult{}
	}
	if g.postStart && opts.BeforePostStart != nil {
		opts.BeforePostStart()
	}
	g.entered <- pod.UID
	if h, ok := g.hold[pod.UID]; ok {
		<-h
	} else {
		<-g.proceed
	}
	g.mu.Lock()
	g.ready[pod.UID] = true
	g.mu.Unlock()
	// A start acted, as the runtime manager's does: the lane reads the
	// status again instead of trusting the one it started from.
	return kuberuntime.SyncResult{Results: []kuberuntime.ActionResult{{Action: kuberuntime.ActionCreatePodSandbox, Target: pod.Name}}}
}

func (g *gatedRuntime) KillPod(_ context.Context, pod *v1.Pod, status *podplan.PodStatus, _ *int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.killed = append(g.killed, status.UID)
	delete(g.ready, status.UID)
	return nil
}

func (g *gatedRuntime) wasKilled(uid types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range g.killed {
		if k == uid {
			return true
		}
	}
	return false
}

// oneSlotWorkers builds lanes over rt with a single start slot, so the
// order and the waits show; cancel stops them.
func oneSlotWorkers(rt Runtime) (*Workers, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	return newTestWorkersWith(ctx, workerOptions{rt: rt, maxStarts: 1}), cancel
}

func startPod(uid types.UID, priority int32) *v1.Pod {
	p := podtest.Stub(uid, string(uid), "1")
	p.Spec.Priority = &priority
	return p
}

// waitingForSlot reports whether uid's status shows its containers
// waiting for a start slot.
func waitingForSlot(w *Workers, uid types.UID) bool {
	return strings.Contains(waitingMessage(w, uid), "waiting for a pod start slot")
}

// waitingMessage is the message of uid's first container while its status
// shows it ContainerCreating, else "". One read of the status: a second
// one could find it not yet recorded, or already replaced.
func waitingMessage(w *Workers, uid types.UID) string {
	p := w.status.Get(uid)
	if p == nil || len(p.Status.ContainerStatuses) == 0 {
		return ""
	}
	wt := p.Status.ContainerStatuses[0].State.Waiting
	if wt == nil || wt.Reason != "ContainerCreating" {
		return ""
	}
	return wt.Message
}

// TestPodWorkersStartOrder: with the one start slot taken, pods that
// arrive together start one at a time in the order they came, after the
// critical ones, which do not wait for the slot of a regular pod but only
// for each other; each waiting pod says why in its status.
func TestPodWorkersStartOrder(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt := newGatedRuntime()
		first := make(chan struct{})
		rt.hold = map[types.UID]chan struct{}{"first": first}
		w, cancel := oneSlotWorkers(rt)

		w.Update(startPod("first", 0))
		if got := <-rt.entered; got != "first" {
			t.Fatalf("first start = %s", got)
		}
		batch := []*v1.Pod{startPod("low-a", 0), startPod("low-b", 0), startPod("cluster", 2000000000), startPod("negative", -10), startPod("node", 2000001000), startPod("low-c", 0)}
		// The sync loop holds the starts while it hands over a batch, so
		// every pod of it ranks before the first lane of it may start.
		w.HoldStarts()
		for _, p := range batch {
			w.Update(p)
		}
		w.ReleaseStarts()
		if got := <-rt.entered; got != "node" {
			t.Fatalf("second start = %s, want the node-critical pod beside the regular one", got)
		}
		for _, p := range batch {
			if p.UID != "node" {
				waitUntil(t, string(p.UID)+" shown waiting for a start slot", func() bool { return waitingForSlot(w, p.UID) })
			}
		}
		rt.proceed <- struct{}{}
		if got := <-rt.entered; got != "cluster" {
			t.Fatalf("third start = %s, want the cluster-critical pod", got)
		}
		rt.proceed <- struct{}{}
		close(first)
		want := []types.UID{"low-a", "low-b", "low-c", "negative"}
		for i, uid := range want {
			if got := <-rt.entered; got != uid {
				t.Fatalf("regular start %d = %s, want %s (order %v)", i+1, got, uid, want)
			}
			rt.proceed <- struct{}{}
		}
		cancel()
		w.wait()
	})
}

// TestPodWorkersStartGauges: the start queue's gauges follow its pods
// as they wait, start and finish.
func TestPodWorkersStartGauges(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt := newGatedRuntime()
		w, cancel := oneSlotWorkers(rt)
		m := newMetrics(prometheus.NewRegistry())
		w.metrics = m
		gauges := func(inflight, queued float64) func() bool {
			return func() bool {
				return testutil.ToFloat64(m.startsInFlight) == inflight && testutil.ToFloat64(m.startsQueued) == queued && testutil.ToFloat64(m.startLimit) == 1
			}
		}

		w.Update(startPod("first", 0))
		<-rt.entered
		waitUntil(t, "one start in flight, none queued", gauges(1, 0))
		w.Update(startPod("second", 0))
		w.Update(startPod("third", 0))
		waitUntil(t, "one start in flight, two queued", gauges(1, 2))
		for _, next := range []types.UID{"second", "third"} {
			rt.proceed <- struct{}{}
			if got := <-rt.entered; got != next {
				t.Fatalf("start = %s, want %s", got, next)
			}
		}
		waitUntil(t, "one start in flight, none queued", gauges(1, 0))
		rt.proceed <- struct{}{}
		waitUntil(t, "no start in flight", gauges(0, 0))
		cancel()
		w.wait()
	})
}

// TestPodWorkersDeadSandboxTakesTwoSlots: with four slots, pods whose
// sandboxes died (the boot after a power cut) start two at a time, a
// waiting one saying so, and a new pod needs only two slots free.
func TestPodWorkersDeadSandboxTakesTwoSlots(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt := newGatedRuntime()
		rt.dead = map[types.UID]bool{"dead-a": true, "dead-b": true, "dead-c": true}
		ctx, cancel := context.WithCancel(context.Background())
		w := newTestWorkers(ctx, rt)
		w.starts = newStartQueue(w.clock, newStartLimit(4))

		for _, uid := range []types.UID{"dead-a", "dead-b"} {
			w.Update(startPod(uid, 0))
			if got := <-rt.entered; got != uid {
				t.Fatalf("start = %s, want %s", got, uid)
			}
		}
		w.Update(startPod("dead-c", 0))
		w.Update(startPod("new", 0))
		waitUntil(t, "dead-c and new waiting, dead-c told the two starts in flight take four slots", func() bool {
			return strings.Contains(waitingMessage(w, "dead-c"), "2 pod starts in flight (limit 4), 0 pods ahead") &&
				strings.Contains(waitingMessage(w, "dead-c"), "the starts in flight take 4 slots") && waitingForSlot(w, "new")
		})
		rt.proceed <- struct{}{}
		if next := <-rt.entered; next != "dead-c" {
			t.Fatalf("third start = %s, want dead-c", next)
		}
		// dead-c and the other first start take all four slots; once one of
		// them is done, new fits in the two left.
		rt.proceed <- struct{}{}
		if next := <-rt.entered; next != "new" {
			t.Fatalf("fourth start = %s, want new", next)
		}
		for range 2 {
			rt.proceed <- struct{}{}
		}
		cancel()
		w.wait()
	})
}

// TestPodWorkersCriticalStartsAlone: while a critical pod starts, the
// others wait, even with slots free, and say why; once its solo time is
// up on the clock (a slow start, say an image pull), they start beside it.
func TestPodWorkersCriticalStartsAlone(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt := newGatedRuntime()
		crit := make(chan struct{})
		rt.hold = map[types.UID]chan struct{}{"crit": crit}
		ctx, cancel := context.WithCancel(context.Background())
		w := newTestWorkers(ctx, rt)
		clk := w.clock.(podtest.AsyncClock)

		w.Update(startPod("crit", 2000001000))
		<-rt.entered
		w.Update(startPod("regular", 0))
		waitUntil(t, "the regular pod waiting for the critical start, with a timer to wake it", func() bool {
			return strings.Contains(waitingMessage(w, "regular"), "a critical pod is starting, alone") && clk.Waiters() == 1
		})
		fired := clk.Fired.Load()
		clk.Step(criticalSoloDefault - time.Millisecond)
		if clk.Fired.Load() != fired || clk.Waiters() != 1 {
			t.Fatalf("the wake fired %s into the critical start, before its solo time was up", criticalSoloDefault-time.Millisecond)
		}
		clk.Step(time.Millisecond)
		if got := <-rt.entered; got != "regular" {
			t.Fatalf("start = %s, want regular", got)
		}
		rt.proceed <- struct{}{}
		close(crit)
		cancel()
		w.wait()
	})
}

// TestPodWorkersPostStartFreesSlot: a pod whose postStart hook runs no
// longer holds its start slot, so a hook that hangs holds nobody back.
func TestPodWorkersPostStartFreesSlot(t *testing.T) {
	defer goleak.VerifyNone(t)
	rt := newGatedRuntime()
	w, cancel := oneSlotWorkers(rt)
	rt.postStart = true

	w.Update(startPod("hooked", 0))
	<-rt.entered
	w.Update(startPod("next", 0))
	if got := <-rt.entered; got != "next" {
		t.Fatalf("second start = %s", got)
	}
	rt.proceed <- struct{}{}
	rt.proceed <- struct{}{}
	cancel()
	w.wait()
}

// TestPodWorkersUnreadablePodKeepsNoRank: a critical pod whose status the
// runtime cannot read does not keep the only slot from the others.
func TestPodWorkersUnreadablePodKeepsNoRank(t *testing.T) {
	defer goleak.VerifyNone(t)
	rt := newGatedRuntime()
	rt.unreadable = map[types.UID]bool{"broken": true}
	w, cancel := oneSlotWorkers(rt)

	w.Update(startPod("broken", 2000001000))
	w.Update(startPod("fine", 0))
	select {
	case got := <-rt.entered:
		if got != "fine" {
			t.Fatalf("start = %s, want fine", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the other pod never started: the unreadable one kept its rank")
	}
	rt.proceed <- struct{}{}
	cancel()
	w.wait()
}

// TestPodWorkersStopsIgnoreStartLimit: while every start slot is taken by
// a start that does not end, a running pod is still stopped and removed.
func TestPodWorkersStopsIgnoreStartLimit(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		rt := newGatedRuntime()
		w, cancel := oneSlotWorkers(rt)

		w.Update(startPod("running", 0))
		<-rt.entered
		rt.proceed <- struct{}{}
		waitUntil(t, "the first pod started", func() bool {
			rt.mu.Lock()
			defer rt.mu.Unlock()
			return rt.ready["running"]
		})
		w.Update(startPod("stuck", 0))
		<-rt.entered // holds the only slot from now on
		w.Update(startPod("waiting", 0))
		waitUntil(t, "a pod waiting for the slot", func() bool { return waitingForSlot(w, "waiting") })

		w.Update(startPod("running", 0)) // a resync of the running pod is no start
		w.Remove("running", nil)
		waitUntil(t, "the running pod stopped and its lane closed", func() bool { return rt.wasKilled("running") && !w.Known("running") })
		w.Remove("waiting", nil)
		waitUntil(t, "the waiting pod gone", func() bool { return !w.Known("waiting") })
		if rt.wasKilled("stuck") {
			t.Error("the pod whose start is in flight was killed")
		}
		rt.proceed <- struct{}{}
		cancel()
		w.wait()
	})
}
