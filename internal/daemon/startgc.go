package daemon

import (
	"runtime/debug"
	"sync"
	"time"
)

// startHeapLimit bounds the heap while the collector is off during
// berth's start (holdGC): room for the start of a node's worth of pods
// (manifests, their last good state, the runtime's listing), while a
// start that allocates more (many large manifests) has the collector run
// again as it must to stay under the limit, so an appliance's memory is
// never at the start's mercy.
const startHeapLimit = 64 << 20

// startBound is the longest berth's start runs without the collector when
// it does not get ready sooner.
const startBound = 10 * time.Second

// holdGC turns the garbage collector off until the returned release is
// called, with the heap bounded by startHeapLimit (or GOMEMLIMIT, if
// lower) meanwhile; release then sets the collector to gcPercent, puts the
// memory limit back and returns what the start left to the OS.
//
// Why: with the small heap berth keeps, the collector would run again and
// again while the start allocates, and its marking and assists would take
// CPU from the moment the first pod can start. release is
// meant for when every pod has been handed over (the agent's ready); it
// may be called any number of times, from any goroutine.
func holdGC(gcPercent int) (release func()) {
	limit := debug.SetMemoryLimit(-1)
	debug.SetMemoryLimit(min(limit, startHeapLimit))
	debug.SetGCPercent(-1)
	var once sync.Once
	return func() {
		once.Do(func() {
			debug.SetGCPercent(gcPercent)
			debug.SetMemoryLimit(limit)
			debug.FreeOSMemory()
		})
	}
}
