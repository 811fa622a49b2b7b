package syncloop

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// health is what /healthz, /readyz, sd_notify and the logs say about berth
// itself. The sync loop writes it; the API and notifier read it.
type health struct {
	clock clock.PassiveClock
	// loopStall is how long the sync loop may go without turning before
	// berth reports itself unhealthy (the kubelet's sync-loop monitor).
	loopStall time.Duration

	mu            sync.Mutex // guards the fields below
	lastLoop      time.Time
	runtimeOK     bool
	runtimeErr    error
	runtimeSince  time.Time // when runtimeOK last changed
	ready         bool
	readySince    time.Time
	pendingReason string // why not ready yet
}

func newHealth(c clock.PassiveClock, loopStall time.Duration) *health {
	return &health{clock: c, loopStall: loopStall, pendingReason: "sources have not delivered yet"}
}

// loopTurned records a sync-loop iteration.
func (h *health) loopTurned() {
	h.mu.Lock()
	h.lastLoop = h.clock.Now()
	h.mu.Unlock()
}

// setRuntime records the outcome of the latest relist. It returns true when
// the runtime's state flipped, so the caller logs transitions only.
func (h *health) setRuntime(err error) (changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ok := err == nil
	changed = ok != h.runtimeOK || h.runtimeSince.IsZero()
	if changed {
		h.runtimeSince = h.clock.Now()
	}
	h.runtimeOK, h.runtimeErr = ok, err
	return changed
}

// setReady marks berth ready; it stays ready for the rest of the run (a
// source failing later keeps its last good pods, so readiness holds).
func (h *health) setReady() (first bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ready {
		return false
	}
	h.ready, h.readySince = true, h.clock.Now()
	return true
}

func (h *health) setPending(reason string) {
	h.mu.Lock()
	h.pendingReason = reason
	h.mu.Unlock()
}

// Healthy returns nil while the sync loop turns and the runtime answers, or
// an error saying which of the two is wrong.
func (h *health) Healthy() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	if h.lastLoop.IsZero() {
		return fmt.Errorf("sync loop has not started")
	}
	if stall := now.Sub(h.lastLoop); stall > h.loopStall {
		return fmt.Errorf("sync loop has not turned for %s", stall.Round(time.Second))
	}
	if !h.runtimeOK {
		if h.runtimeErr == nil {
			return fmt.Errorf("runtime not reached yet")
		}
		return fmt.Errorf("runtime unreachable for %s: %v", now.Sub(h.runtimeSince).Round(time.Second), h.runtimeErr)
	}
	return nil
}

// Ready returns nil once every source delivered and the first sync was
// dispatched, else why not.
func (h *health) Ready() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ready {
		return fmt.Errorf("not ready: %s", h.pendingReason)
	}
	return nil
}
