package podworkers

import (
	"cmp"
	"runtime"
	"slices"
	"time"
)

// DefaultMaxParallelPodStarts is the default bound on pod starts in flight:
// two per CPU. A start is CPU work in the runtime (shim, runc, CNI): more
// in flight than the cores can serve only delays the first pod without
// bringing the last one sooner.
func DefaultMaxParallelPodStarts() int {
	return max(2, 2*runtime.NumCPU())
}

// Tuning of the start limit's adaptation.
//
// A start's cost is its latency divided by the mean number of starts in
// flight while it ran, itself included: the runtime's time per start. A
// runtime that is only busy (every core taken, by berth's starts or by
// anything else) takes longer per start as more run at once, at the same
// cost, and fewer in flight would only leave it idle between starts: a
// limit that shrinks on latency alone slows a burst on a loaded machine
// without relieving the runtime. A cost over
// slowFactor times the lowest recent one, while pods wait, means the
// runtime gets through starts at a fraction of its pace, as a runtime
// thrashing under too many at once does: one slot fewer.
//
// A start within fastFactor of the quickest recent latency, while pods
// wait, means there is room: one slot more, up to the configured maximum.
const (
	slowFactor   = 3
	fastFactor   = 2
	limitSamples = 64 // the window of starts the best figures are taken from
)

// soloFactor is how many times the quickest recent start a critical start
// keeps the runtime to itself (startQueue.soloFor): about what a start
// takes with the runtime busy with a few others.
const soloFactor = 4

// startSample is one completed start.
type startSample struct {
	latency time.Duration // from slot taken to slot given back
	cost    time.Duration // latency per start in flight meanwhile
}

// startLimit is how many pod starts may be in flight: at most max (the
// --max-parallel-pod-starts setting), fewer while the runtime gets through
// starts far slower than it did (see slowFactor). It changes by one at a
// time, and only on starts that began after its last change, so the
// starts that ran together under one limit move it once. It is not safe
// for concurrent use: the start queue's owner guards it.
type startLimit struct {
	max, limit int
	// samples are the latest starts, oldest first.
	samples []startSample
	// changed is when the limit last changed.
	changed time.Time
}

func newStartLimit(max int) *startLimit {
	return &startLimit{max: max, limit: max}
}

func (l *startLimit) current() int { return l.limit }

// best is the quickest of the recent starts; false before any.
func (l *startLimit) best() (time.Duration, bool) {
	if len(l.samples) == 0 {
		return 0, false
	}
	return slices.MinFunc(l.samples, func(a, b startSample) int { return cmp.Compare(a.latency, b.latency) }).latency, true
}

// Observe takes one completed start, from slot taken (began) to slot given
// back (ended), with inflight the mean number of starts in flight
// meanwhile, itself included; waiting tells whether pods wait for a slot:
// without them the limit held nobody back, and a larger one would not be
// used.
func (l *startLimit) observe(began, ended time.Time, inflight float64, waiting bool) {
	d := ended.Sub(began)
	s := startSample{latency: d, cost: time.Duration(float64(d) / max(inflight, 1))}
	l.samples = append(l.samples, s)
	if len(l.samples) > limitSamples {
		l.samples = slices.Delete(l.samples, 0, len(l.samples)-limitSamples)
	}
	if began.Before(l.changed) {
		return
	}
	best, _ := l.best()
	bestCost := slices.MinFunc(l.samples, func(a, b startSample) int { return cmp.Compare(a.cost, b.cost) }).cost
	switch {
	case !waiting:
		// The limit held nobody back: it says nothing either way. A lone
		// start costs more than one among several on a runtime that
		// runs starts in parallel.
	case s.cost > slowFactor*bestCost && l.limit > 1:
		l.limit--
		l.changed = ended
	case d <= fastFactor*best && l.limit < l.max:
		l.limit++
		l.changed = ended
	}
}
