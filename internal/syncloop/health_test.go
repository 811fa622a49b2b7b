package syncloop

import (
	"errors"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestHealth: berth is unhealthy until the sync loop turns and the runtime
// answers, again when the loop stalls or the runtime is unreachable, and
// not ready until setReady.
func TestHealth(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	h := newHealth(clk, time.Minute)
	unhealthy := func(when, want string) {
		t.Helper()
		if err := h.Healthy(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Healthy() = %v, want %q", when, err, want)
		}
	}
	unhealthy("before start", "sync loop has not started")
	h.loopTurned()
	h.setRuntime(nil)
	if err := h.Healthy(); err != nil {
		t.Errorf("healthy: %v", err)
	}
	clk.Step(time.Hour)
	unhealthy("stalled loop", "sync loop has not turned for 1h0m0s")
	h.loopTurned()
	h.setRuntime(errors.New("connection refused"))
	unhealthy("runtime down", "runtime unreachable")

	if err := h.Ready(); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("not ready: %v", err)
	}
	h.setReady()
	if err := h.Ready(); err != nil {
		t.Errorf("ready: %v", err)
	}
}
