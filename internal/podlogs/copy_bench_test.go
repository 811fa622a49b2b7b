package podlogs

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-agent/berth/bench/heapsample"
)

// BenchmarkCopyUnfinishedLine: 10 readers of a log holding 16 MiB of P
// records and no F, what a container writing without a newline leaves (the
// runtime splits its output every 16 KiB). It reports the peak heap in use
// while they read, the figure that grew with the line when partial records
// were joined whole.
func BenchmarkCopyUnfinishedLine(b *testing.B) {
	const readers = 10
	path := filepath.Join(b.TempDir(), "0.log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	record := "2024-05-01T10:00:00Z stdout P " + strings.Repeat("p", 16<<10) + "\n"
	for range 1024 {
		f.WriteString(record)
	}
	f.Close()
	report := heapsample.Start(b, 2*time.Millisecond)
	for range b.N {
		var wg sync.WaitGroup
		for range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := Copy(context.Background(), path, io.Discard, Options{TailLines: -1}); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	report()
}
