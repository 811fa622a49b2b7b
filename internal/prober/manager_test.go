package prober

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// The worker tests run in a synctest bubble: synctest.Wait returns once
// every worker goroutine has parked on its fake-clock timer or on the test,
// so what they did by then is all they will do until the test moves on.

// waitWaiters waits until the bubble's goroutines are parked and checks that
// the fake clock has n waiters: the workers' timers or tickers.
func waitWaiters(t *testing.T, clk *clocktesting.FakeClock, n int) {
	t.Helper()
	synctest.Wait()
	if got := clk.Waiters(); got != n {
		t.Fatalf("fake clock has %d waiters, want %d", got, n)
	}
}

// nextProbe waits until the bubble's goroutines are parked and returns the
// fake time of the probe made by then.
func nextProbe(t *testing.T, called chan time.Time) time.Time {
	t.Helper()
	synctest.Wait()
	select {
	case at := <-called:
		return at
	default:
		t.Fatal("no probe")
	}
	return time.Time{}
}

// TestWorkerTiming runs real worker goroutines on a fake clock: a worker
// started just after berth started waits a jitter (here half its period),
// then probes once per period; new runs of its container are probed at
// once; RemovePod stops it and no goroutine or timer is left.
func TestWorkerTiming(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, testWorkerTiming)
}

func testWorkerTiming(t *testing.T) {
	env := newTestEnv(t)
	env.probe.called = make(chan time.Time, 10)
	env.m.rand = func() float64 { return 0.5 }
	pod := probePod(nil, execProbe(1, 1), nil)

	env.m.UpdatePod(pod, running(pod, "c1", t0), "")
	waitWaiters(t, env.clock, 1) // the jitter timer
	env.clock.Step(4 * time.Second)
	env.clock.Step(time.Second)
	if at := nextProbe(t, env.probe.called); !at.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("first probe at +%v, want after the 5s jitter", at.Sub(t0))
	}
	waitWaiters(t, env.clock, 1) // the period timer
	env.clock.Step(10 * time.Second)
	if at := nextProbe(t, env.probe.called); !at.Equal(t0.Add(15 * time.Second)) {
		t.Errorf("second probe at +%v, want one period later", at.Sub(t0))
	}
	if !env.m.Ready(pod.UID, "app") {
		t.Error("not ready after a successful probe")
	}
	// A restart: the new run is probed without waiting for the period.
	env.m.UpdatePod(pod, running(pod, "c2", t0.Add(15*time.Second)), "")
	if at := nextProbe(t, env.probe.called); !at.Equal(t0.Add(15 * time.Second)) {
		t.Errorf("new run probed at +%v, want at once", at.Sub(t0))
	}

	env.m.RemovePod(pod.UID)
	env.m.Stop()
	if env.clock.Waiters() != 0 {
		t.Errorf("%d timers left after the pod's probes were removed", env.clock.Waiters())
	}
	if env.m.Ready(pod.UID, "app") != true {
		t.Error("a removed pod's readiness is still gated")
	}
}

// TestNoJitterLater: once berth has run for a period, a new container is
// probed at once.
func TestNoJitterLater(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, testNoJitterLater)
}

func testNoJitterLater(t *testing.T) {
	env := newTestEnv(t)
	env.probe.called = make(chan time.Time, 10)
	env.m.rand = func() float64 { return 0.9 }
	env.clock.Step(time.Minute)
	pod := probePod(nil, execProbe(1, 1), nil)
	env.m.UpdatePod(pod, running(pod, "c1", t0.Add(time.Minute)), "")
	if at := nextProbe(t, env.probe.called); !at.Equal(t0.Add(time.Minute)) {
		t.Errorf("first probe at +%v, want at once", at.Sub(t0))
	}
	env.m.Stop()
}

// TestWorkersFollowTheSpec: workers start for running containers only,
// one per probe kind; a probe that left the spec stops its worker.
func TestWorkersFollowTheSpec(t *testing.T) {
	defer goleak.VerifyNone(t)
	env := newTestEnv(t)
	env.clock.Step(time.Minute)
	count := func() int {
		env.m.mu.Lock()
		defer env.m.mu.Unlock()
		if pp := env.m.pods["uid-1"]; pp != nil {
			return len(pp.workers)
		}
		return 0
	}
	pod := probePod(execProbe(1, 3), execProbe(1, 3), nil)
	st := running(pod, "c1", t0)
	st.Containers[0].State = "created"
	env.m.UpdatePod(pod, st, "")
	if n := count(); n != 0 {
		t.Fatalf("%d workers for a container not running yet", n)
	}
	env.m.UpdatePod(pod, running(pod, "c1", t0), "")
	if n := count(); n != 2 {
		t.Fatalf("%d workers, want liveness and readiness", n)
	}
	changed := probePod(execProbe(1, 3), nil, nil)
	env.m.UpdatePod(changed, running(changed, "c1", t0), "")
	if n := count(); n != 1 {
		t.Fatalf("%d workers after the readiness probe left the spec, want 1", n)
	}
	env.m.Stop()
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	env := newTestEnv(t)
	env.m.metrics = newProbeMetrics(reg)
	pod := probePod(nil, execProbe(1, 1), nil)
	w := env.handWorker(pod, Readiness)
	env.m.UpdatePod(pod, running(pod, "c1", t0), "")
	env.probe.results = []Result{Success, Failure, Failure}
	w.doProbe()
	w.doProbe()
	w.doProbe()
	want := `
# HELP berth_prober_probe_total Probes run, by kind (liveness, readiness, startup), result (successful, failed, unknown) and container.
# TYPE berth_prober_probe_total counter
berth_prober_probe_total{container="app",namespace="default",pod="web-node",pod_uid="uid-1",probe_type="readiness",result="failed"} 2
berth_prober_probe_total{container="app",namespace="default",pod="web-node",pod_uid="uid-1",probe_type="readiness",result="successful"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "berth_prober_probe_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(env.m.metrics.duration); n != 1 {
		t.Errorf("%d duration series, want 1 (per probe kind)", n)
	}
	env.m.RemovePod(types.UID("uid-1"))
	if n := testutil.CollectAndCount(env.m.metrics.total); n != 0 {
		t.Errorf("%d probe counter series left after the pod was removed", n)
	}
}
