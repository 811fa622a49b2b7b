package source

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/source/sourcemetrics/sourcemetricstest"
)

// unixSeconds is t as the sources' timestamp gauges hold it.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// gauge is the value of name{source,origin} in reg, 0 when absent.
func gauge(t testing.TB, reg prometheus.Gatherer, name, source, origin string) float64 {
	t.Helper()
	v, _ := sourcemetricstest.Value(t, reg, name, source, origin)
	return v
}

// TestSourceFreshness checks the file source's gauges after its first
// read: a read directory is a success and an attempt, a refused one an
// attempt only, and an unsigned source has no accepted serial.
func TestSourceFreshness(t *testing.T) {
	for _, tt := range []struct {
		name    string
		mode    os.FileMode
		success bool
	}{
		{"readable", 0o755, true},
		{"writable by others", 0o777, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "manifests")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			renameIn(t, filepath.Join(dir, "web.yaml"), podspectest.Manifest("web", "img:1"))
			if err := os.Chmod(dir, tt.mode); err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			m := NewMetrics(reg)
			src := startSources(t, Config{ManifestPath: dir, Metrics: m})
			eventually(t, "the first snapshot", func() bool { return src.store.Applied() >= 1 })
			if got := gauge(t, reg, "berth_source_last_attempt_timestamp_seconds", podspec.SourceFile, dir); got != unixSeconds(stateClock) {
				t.Errorf("last attempt %v, want %v", got, unixSeconds(stateClock))
			}
			want := 0
			if tt.success {
				want = 1
				if got := gauge(t, reg, "berth_source_last_success_timestamp_seconds", podspec.SourceFile, dir); got != unixSeconds(stateClock) {
					t.Errorf("last success %v, want %v", got, unixSeconds(stateClock))
				}
			}
			if n := sourcemetricstest.Count(t, reg, "berth_source_last_success_timestamp_seconds"); n != want {
				t.Errorf("%d last success series, want %d", n, want)
			}
			if n := sourcemetricstest.Count(t, reg, "berth_source_accepted_serial"); n != 0 {
				t.Errorf("an unsigned source exports %d accepted serials, want none", n)
			}
		})
	}
}
