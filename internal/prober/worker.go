package prober

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// workerKey names a worker within its pod: one per container and kind.
type workerKey struct {
	container string
	kind      Kind
}

// worker probes one container of one pod with one probe kind, for as long
// as the container may run: across restarts (each new runtime container
// starts over from the kind's initial result), until the pod's probes are
// removed, the probe leaves the spec, or the container has exited for
// good.
type worker struct {
	m         *Manager
	uid       types.UID
	pod       string // namespace/name, for logs, events and metrics
	name      string // pod name
	namespace string
	container string
	kind      Kind
	spec      *v1.Probe
	// ctx is cancelled to stop the worker, which also aborts a probe in
	// flight.
	ctx    context.Context
	cancel context.CancelFunc
	// trigger asks for a probe now (a new container run, a startup probe
	// that just succeeded); it holds one pending request.
	trigger chan struct{}

	// containerID is the runtime container the worker's results are for.
	// Guarded by m.mu.
	containerID string

	// Owned by the worker's goroutine: the current streak of equal results
	// (thresholds count it), and whether probing is held until a new
	// container run after a liveness or startup failure killed this one.
	lastResult Result
	resultRun  int
	onHold     bool
}

// period is the probe period, at least a second as the API requires.
func (w *worker) period() time.Duration {
	return max(time.Duration(w.spec.PeriodSeconds)*time.Second, time.Second)
}

// timeout is the probe timeout, at least a second as the API requires.
func (w *worker) timeout() time.Duration {
	return max(time.Duration(w.spec.TimeoutSeconds)*time.Second, time.Second)
}

// poke asks for a probe as soon as the worker is free, without blocking.
func (w *worker) poke() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

// run is the worker's goroutine: a probe at once (after a jitter when berth
// has just started, so the pods it adopted do not all probe in lock-step),
// then one per period or trigger, until doProbe says to stop or the
// worker is stopped.
func (w *worker) run() {
	defer w.m.wg.Done()
	defer w.m.workerExited(w)
	if d := w.m.jitter(w.period()); d > 0 {
		t := w.m.clock.NewTimer(d)
		select {
		case <-w.ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
	// A timer re-armed on each tick rather than a ticker: the same
	// schedule, and a stopped worker provably leaves no timer behind.
	tick := w.m.clock.NewTimer(w.period())
	defer tick.Stop()
	for w.doProbe() {
		select {
		case <-w.ctx.Done():
			return
		case <-tick.C():
			tick.Reset(w.period())
		case <-w.trigger:
		}
	}
}

// doProbe is one turn of the kubelet's probe worker: follow the container
// to its newest run, skip what must not be probed yet (a run held after a
// kill, a container not started or within its initial delay), probe, and
// report a result once the threshold of equal results is reached. It
// reports whether the worker should keep going.
func (w *worker) doProbe() bool {
	snap, ok := w.m.snapshot(w)
	if !ok {
		return false
	}
	if snap.newRun {
		w.lastResult, w.resultRun, w.onHold = Unknown, 0, false
	}
	run := snap.run
	switch {
	case run.id == "", w.onHold:
		return true
	case !run.running:
		// Not running: not ready, and nothing to probe until it runs
		// again, if it ever does.
		if w.kind == Readiness {
			w.m.setResult(w, run.id, Failure)
		}
		return !run.exited || snap.restarts
	case w.kind != Startup && !snap.started, w.kind == Startup && snap.started:
		// Startup gates the other probes; once it succeeded it is done.
		return true
	case w.spec.InitialDelaySeconds > 0 && w.m.clock.Since(run.startedAt) < time.Duration(w.spec.InitialDelaySeconds)*time.Second:
		return true
	}

	result, err := w.m.probe(w, snap.target)
	if w.ctx.Err() != nil {
		return false
	}
	if err != nil || result == Unknown {
		// A broken probe says nothing of the container: keep the result.
		return true
	}
	if w.lastResult == result {
		w.resultRun++
	} else {
		w.lastResult, w.resultRun = result, 1
	}
	if (result == Failure && w.resultRun < int(max(w.spec.FailureThreshold, 1))) ||
		(result == Success && w.resultRun < int(max(w.spec.SuccessThreshold, 1))) {
		return true
	}
	w.m.setResult(w, run.id, result)
	if result == Failure && (w.kind == Liveness || w.kind == Startup) {
		// The container is about to be killed; probing it meanwhile
		// would only race the kill. Hold until its next run.
		w.onHold = true
		w.resultRun = 0
	}
	return true
}
