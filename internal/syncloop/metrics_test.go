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

// TestContainerRestartsMetric: a container's restarts are the counter
// berth_container_restarts_total (and, one release more, the deprecated
// gauge berth_container_restarts), and both series go with the pod.
func TestContainerRestartsMetric(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		p := podtest.Simple(t, "crash", "exit 1")
		h.apply(podspec.SourceFile, p)
		h.eventually("running", func() bool { n, _ := h.rt.running(p.UID); return n == 1 })
		h.rt.exit(p.UID, 1, h.clock.Now())
		h.step(h.agent.cfg.RelistPeriod)
		h.eventually("restarted once", func() bool {
			st := h.status(p.UID)
			return st != nil && len(st.Status.ContainerStatuses) == 1 && st.Status.ContainerStatuses[0].RestartCount == 1
		})
		want := `
# HELP berth_container_restarts Deprecated: use berth_container_restarts_total. Restart count of each container of berth's pods.
# TYPE berth_container_restarts gauge
berth_container_restarts{container="app",namespace="default",pod="crash-node1"} 1
# HELP berth_container_restarts_total Restarts of each container of berth's pods, its status' restartCount: the series goes with its pod, and starts again from 0 when the pod is replaced (a new version of its manifest), which rate() takes as a counter reset.
# TYPE berth_container_restarts_total counter
berth_container_restarts_total{container="app",namespace="default",pod="crash-node1"} 1
`
		if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "berth_container_restarts_total", "berth_container_restarts"); err != nil {
			t.Fatal(err)
		}
		h.apply(podspec.SourceFile)
		h.eventually("pod gone", func() bool { return h.status(p.UID) == nil })
		if n, err := testutil.GatherAndCount(h.reg, "berth_container_restarts_total", "berth_container_restarts"); err != nil || n != 0 {
			t.Fatalf("%d restart series after the pod went, err %v; want none", n, err)
		}
	})
}
