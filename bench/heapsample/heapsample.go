// Package heapsample measures the peak Go heap of a benchmark's loop, for
// the memory figures of the local API and the log reader (`make bench`'s
// gobench rows): testing's own allocation figures count bytes allocated,
// not how much is live at once under concurrent readers.
package heapsample

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// Start collects garbage, records the heap in use as the base, and samples
// it every interval until the returned function is called; that function
// stops b's timer and reports base-heap-MB and peak-heap-MB on b.
func Start(b *testing.B, interval time.Duration) (report func()) {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
		}
	}()
	b.ResetTimer()
	return func() {
		b.StopTimer()
		close(stop)
		<-sampled
		b.ReportMetric(float64(base.HeapInuse)/(1<<20), "base-heap-MB")
		b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
	}
}
