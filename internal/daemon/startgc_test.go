package daemon

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestHoldGC: the collector is off during the start with the heap bounded,
// and release brings back the given percentage and the limit there was,
// however often it is called.
func TestHoldGC(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limit      int64 // GOMEMLIMIT before
		wantDuring int64
	}{
		{name: "no GOMEMLIMIT", limit: math.MaxInt64, wantDuring: startHeapLimit},
		{name: "a lower GOMEMLIMIT holds", limit: 32 << 20, wantDuring: 32 << 20},
		{name: "a higher one is lowered for the start", limit: 1 << 30, wantDuring: startHeapLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			percent := debug.SetGCPercent(100)
			limit := debug.SetMemoryLimit(tc.limit)
			defer func() {
				debug.SetGCPercent(percent)
				debug.SetMemoryLimit(limit)
			}()

			release := holdGC(50)
			if got := debug.SetGCPercent(-1); got != -1 {
				t.Errorf("during the start GOGC = %d, want off", got)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.wantDuring {
				t.Errorf("during the start the memory limit = %d, want %d", got, tc.wantDuring)
			}
			release()
			release()
			if got := debug.SetGCPercent(50); got != 50 {
				t.Errorf("after the start GOGC = %d, want 50", got)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.limit {
				t.Errorf("after the start the memory limit = %d, want %d", got, tc.limit)
			}
		})
	}
}
