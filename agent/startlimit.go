package agent

import (
	"runtime"
	"slices"
	"time"
)

// DefaultMaxParallelPodStarts is the default bound on pod starts in flight:
// two per CPU. A start is CPU work in the runtime (shim, runc, CNI); on the
// 2-core machines berth is measured on (`make bench`, the floor figure),
// 4 in flight bring the first pod up ten times sooner than 50 and the last
// no later.
func DefaultMaxParallelPodStarts() int {
	return max(2, 2*runtime.NumCPU())
}

// Tuning of the start limit's adaptation. A start that takes more than
// slowFactor times the best recent one means the runtime is saturated (by
// berth's own starts, or by whatever else loads the machine): one slot
// fewer. One within fastFactor of it, while pods wait, means there is room:
// one slot more, up to the configured maximum. On the 2-core machines
// berth is measured on, a start with 4 in flight takes 2-3 times a lone
// one and all 50 pods of a burst come up as fast as with every pod in
// flight; with 8 or more, latency grows with no gain in throughput.
const (
	slowFactor   = 4
	fastFactor   = 2
	limitSamples = 64 // the window of starts the best latency is taken from
)

// startLimit is how many pod starts may be in flight: at most max (the
// --max-parallel-pod-starts setting), fewer while the runtime is slow. It
// changes by one at a time, and only on starts that began after its last
// change, so the starts that ran together under one limit move it once.
// It is not safe for concurrent use: the start queue's owner guards it.
type startLimit struct {
	max, limit int
	// samples are the latest start latencies, oldest first.
	samples []time.Duration
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
	return slices.Min(l.samples), true
}

// observe takes one completed start, from slot taken (began) to slot given
// back (ended); waiting tells whether pods wait for a slot, without which
// a larger limit would not be used.
func (l *startLimit) observe(began, ended time.Time, waiting bool) {
	d := ended.Sub(began)
	l.samples = append(l.samples, d)
	if len(l.samples) > limitSamples {
		l.samples = slices.Delete(l.samples, 0, len(l.samples)-limitSamples)
	}
	if began.Before(l.changed) {
		return
	}
	best := slices.Min(l.samples)
	switch {
	case d > slowFactor*best && l.limit > 1:
		l.limit--
		l.changed = ended
	case d <= fastFactor*best && waiting && l.limit < l.max:
		l.limit++
		l.changed = ended
	}
}
