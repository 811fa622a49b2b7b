package syncloop

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podtest"
	"github.com/berth-agent/berth/internal/podworkers"
)

func TestAgentMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{maxPods: 1})
		p := podtest.Simple(t, "web", podtest.Loop)
		extra := podtest.Simple(t, "extra", podtest.Loop)
		h.apply(podspec.SourceFile, p, extra)
		// The lane counts its step once the sync, and the start it counted,
		// are done.
		h.eventually("pod started and counted", func() bool {
			return h.metric("berth_started_containers_total", "container_type", "container").GetCounter().GetValue() == 1 && h.steps("sync") > 0
		})
		want := `
# HELP berth_running_pods Pods with a running container.
# TYPE berth_running_pods gauge
berth_running_pods 1
# HELP berth_pods_rejected Pods berth refused to run, by reason (OutOfpods, Invalid, DecodeError, ...).
# TYPE berth_pods_rejected gauge
berth_pods_rejected{reason="OutOfpods"} 1
# HELP berth_started_pods_total Pod sandboxes berth started.
# TYPE berth_started_pods_total counter
berth_started_pods_total 1
`
		if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "berth_running_pods", "berth_pods_rejected", "berth_started_pods_total"); err != nil {
			t.Error(err)
		}
		if got, want := h.metric("berth_pod_start_limit", "", "").GetGauge().GetValue(), float64(podworkers.DefaultMaxParallelPodStarts()); got != want {
			t.Errorf("berth_pod_start_limit = %v, want the default maximum %v", got, want)
		}
		for _, name := range []string{"berth_pod_start_duration_seconds", "berth_pleg_relist_duration_seconds", "berth_sync_loop_iterations_total", "berth_pod_worker_duration_seconds"} {
			if n, err := testutil.GatherAndCount(h.reg, name); err != nil || n == 0 {
				t.Errorf("%s: %d series, err %v", name, n, err)
			}
		}
	})
}
