//go:build e2e

package kuberuntime

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/runtimewatch/runtimewatchtest"
)

// startE2EPod runs a sandbox with the given busybox containers on the
// test bed via m's runtime, with its logs in m's PodLogsDir; it is removed
// when t ends.
func startE2EPod(ctx context.Context, t *testing.T, m *Manager, name string, hostNetwork bool, containers ...runtimewatchtest.Container) *runtimewatchtest.Pod {
	t.Helper()
	return runtimewatchtest.StartPod(ctx, t, m.runtime, testBed.BusyboxImage, m.opts.PodLogsDir, name, hostNetwork, containers...)
}

// waitPodStatus polls m's PodStatus until ok accepts it.
func waitPodStatus(ctx context.Context, t *testing.T, m *Manager, uid types.UID, what string, ok func(*podplan.PodStatus) bool) *podplan.PodStatus {
	t.Helper()
	return runtimewatchtest.WaitPodStatus(ctx, t, m.PodStatus, uid, what, ok)
}

// totalOps sums berth_runtime_operations_total over all operations.
func totalOps(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "berth_runtime_operations_total" {
			for _, m := range mf.Metric {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
