package source

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/store"
)

// BenchmarkRenameToAdd measures what an operator waits for: from the
// rename of a manifest into the watched directory to its ADD on the update
// channel, for 200 files one after the other, in a directory that fills
// up to 200 manifests.
func BenchmarkRenameToAdd(b *testing.B) {
	const files = 200
	root := b.TempDir()
	dir := filepath.Join(root, "manifests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	st := store.New(podspec.SourceFile)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Run(ctx, Config{NodeName: podspectest.Node, ManifestPath: dir, FileCheckFrequency: time.Hour,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, st)
	}()
	defer func() { cancel(); <-done }()
	wait := func(op store.Op, n int) {
		for n > 0 {
			select {
			case u := <-st.Updates():
				if u.Op == op {
					n -= len(u.Pods)
				}
			case <-time.After(10 * time.Second):
				b.Fatalf("no %s within 10s", op)
			}
		}
	}
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		for f := range files {
			name := fmt.Sprintf("app-%d.yaml", f)
			tmp := filepath.Join(root, name)
			if err := os.WriteFile(tmp, []byte(podspectest.Sized(i*files+f)), 0o644); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
				b.Fatal(err)
			}
			wait(store.OpAdd, 1)
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		for f := range files {
			if err := os.Remove(filepath.Join(dir, fmt.Sprintf("app-%d.yaml", f))); err != nil {
				b.Fatal(err)
			}
		}
		wait(store.OpRemove, files)
		b.StartTimer()
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "ms-median")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "ms-p99")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkFirstScan50 measures what a boot waits for before its first
// pod can start: from Run to the ADD of 50 manifests already in place,
// with the last-good state written, on a first boot (no state yet) and on
// a later one (the state of the same manifests already on disk).
func BenchmarkFirstScan50(b *testing.B) {
	for _, bc := range []struct {
		name  string
		again bool
	}{{"first boot", false}, {"state present", true}} {
		b.Run(bc.name, func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "manifests")
			if err := os.Mkdir(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			for f := range 50 {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("app-%d.yaml", f)), []byte(podspectest.Sized(f)), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			boot := func(stateDir string) time.Duration {
				st := store.New(podspec.SourceFile)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error)
				start := time.Now()
				go func() {
					done <- Run(ctx, Config{NodeName: podspectest.Node, ManifestPath: dir, FileCheckFrequency: time.Hour,
						StateDir: stateDir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, st)
				}()
				defer func() { cancel(); <-done }()
				for n := 0; n < 50; {
					select {
					case u := <-st.Updates():
						n += len(u.Pods)
					case <-time.After(10 * time.Second):
						b.Fatal("no ADD of 50 within 10s")
					}
				}
				return time.Since(start)
			}
			var lat []time.Duration
			for b.Loop() {
				b.StopTimer()
				stateDir := filepath.Join(b.TempDir(), "state")
				if bc.again {
					boot(stateDir)
				}
				b.StartTimer()
				lat = append(lat, boot(stateDir))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-median")
			b.ReportMetric(0, "ns/op")
		})
	}
}
