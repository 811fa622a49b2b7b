//go:build e2e

package runtimewatch

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/criclient"
	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/runtimewatch/runtimewatchtest"
)

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

func TestE2ERelistAndPodStatus(t *testing.T) {
	env := newE2EEnv(t)
	reg := prometheus.NewRegistry()
	rs, _ := criclient.Instrument(env.rs, env.is, reg)
	m := New(rs, Options{PodLogsDir: env.podLogsDir, Clock: frozenClock()})
	ctx := context.Background()
	_, subnet, err := net.ParseCIDR(testBed.Subnet)
	if err != nil {
		t.Fatal(err)
	}

	p := env.startPod(ctx, t, "observed", false,
		runtimewatchtest.Container{Name: "runs", Script: "exec sleep 3600"},
		runtimewatchtest.Container{Name: "exits", Script: "echo bye; sleep 0.5; exit 3"})
	hp := env.startPod(ctx, t, "hostnet", true, runtimewatchtest.Container{Name: "runs", Script: "exec sleep 3600"})

	st := runtimewatchtest.WaitPodStatus(ctx, t, m.PodStatus, p.UID, "exits exited", func(s *podplan.PodStatus) bool {
		c := s.FindContainer("exits")
		return c != nil && c.State == podplan.ContainerStateExited
	})
	if st.Name != "observed" || st.Namespace != "default" || len(st.Sandboxes) != 1 || len(st.Containers) != 2 {
		t.Fatalf("status = %+v", st)
	}
	sb := st.Sandboxes[0]
	if sb.ID != p.SandboxID || sb.State != podplan.SandboxStateReady || sb.HostNetwork || sb.CreatedAt.IsZero() {
		t.Errorf("sandbox = %+v", sb)
	}
	if len(st.IPs) != 1 || !subnet.Contains(net.ParseIP(st.IPs[0])) {
		t.Errorf("pod IPs %v not in the bed's subnet %s", st.IPs, testBed.Subnet)
	}
	runs, exits := st.FindContainer("runs"), st.FindContainer("exits")
	if runs.State != podplan.ContainerStateRunning || runs.StartedAt.IsZero() || !runs.FinishedAt.IsZero() || runs.ID != p.Containers["runs"] {
		t.Errorf("runs = %+v", runs)
	}
	if exits.ExitCode != 3 || exits.Reason != "Error" || exits.FinishedAt.Before(exits.StartedAt) || exits.StartedAt.IsZero() {
		t.Errorf("exits = %+v, want exit code 3, reason Error, start before finish", exits)
	}
	for _, c := range st.Containers {
		if c.SandboxID != p.SandboxID || c.Image != "busybox:1.36" || c.ImageRef == "" || c.Hash != 0xabc123 || c.RestartCount != 2 {
			t.Errorf("container %s: sandbox %q image %q ref %q hash %x restarts %d", c.Name, c.SandboxID, c.Image, c.ImageRef, c.Hash, c.RestartCount)
		}
	}
	t.Logf("exited container: code %d reason %q image ref %s", exits.ExitCode, exits.Reason, exits.ImageRef)

	hst, err := m.PodStatus(ctx, hp.UID)
	if err != nil {
		t.Fatal(err)
	}
	if len(hst.Sandboxes) != 1 || !hst.Sandboxes[0].HostNetwork || len(hst.IPs) != 0 {
		t.Errorf("host network pod: %+v", hst)
	}

	pods, err := m.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := pods[p.UID]
	if got == nil || got.FindContainer("exits").ExitCode != 3 || len(got.IPs) != 1 || got.IPs[0] != st.IPs[0] || pods[hp.UID] == nil {
		t.Errorf("Relist disagrees with PodStatus: %+v", got)
	}

	before := totalOps(t, reg)
	for range 5 {
		if _, err := m.Relist(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if calls := totalOps(t, reg) - before; calls != 5 {
		t.Errorf("5 idle relists made %v CRI calls, want 5 (ListContainers only while nothing changes)", calls)
	}
	start := time.Now()
	const n = 50
	for range n {
		if _, err := m.Relist(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("idle relist on the real runtime: %v each (%d pods listed)", time.Since(start)/n, len(pods))
}

// TestE2ERelistFiftyPods measures observation at the size berth aims at:
// a cold relist (a restarted berth) reads each object once, an idle one is
// one call whatever the number of pods.
func TestE2ERelistFiftyPods(t *testing.T) {
	const n = 50
	env := newE2EEnv(t)
	ctx := context.Background()
	created := time.Now()
	for i := range n {
		env.startPod(ctx, t, fmt.Sprintf("many-%02d", i), false, runtimewatchtest.Container{Name: "runs", Script: "exec sleep 3600"})
	}
	t.Logf("created %d pods in %v", n, time.Since(created))

	reg := prometheus.NewRegistry()
	rs, _ := criclient.Instrument(env.rs, env.is, reg)
	m := New(rs, Options{PodLogsDir: env.podLogsDir, Clock: frozenClock()})
	start := time.Now()
	pods, err := m.Relist(ctx)
	cold := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	objects := 0
	for _, p := range pods {
		objects += len(p.Sandboxes) + len(p.Containers)
	}
	if len(pods) < n {
		t.Fatalf("relist found %d pods, want at least %d", len(pods), n)
	}
	// The watcher's first relist also asks the runtime its name once
	// (runtimename.go): the scheme of the container IDs it reports.
	if calls := totalOps(t, reg); calls != float64(3+objects) {
		t.Errorf("cold relist made %v calls, want 2 lists, 1 version and %d status calls", calls, objects)
	}

	before := totalOps(t, reg)
	start = time.Now()
	const rounds = 20
	for range rounds {
		if _, err := m.Relist(ctx); err != nil {
			t.Fatal(err)
		}
	}
	idle := time.Since(start) / rounds
	if calls := totalOps(t, reg) - before; calls != rounds {
		t.Errorf("%d idle relists made %v calls, want %d", rounds, calls, rounds)
	}
	t.Logf("%d pods: cold relist %v (%d calls), idle relist %v (1 call)", len(pods), cold, 3+objects, idle)
}

// frozenClock stops time for a watcher, so the idle call counts do not
// depend on how fast the machine runs the relists (sandboxRelistPeriod).
func frozenClock() *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(time.Now())
}

// After a restart or a power cut every object is new to the status cache:
// the first relist reads them all, several at a time. On the real runtime
// each dead pod must still come back whole (sandbox NOTREADY, container
// EXITED with its code). The time of that read, beside the same statuses
// read one after the other, is logged as a figure, not asserted.
func TestE2ERelistReadsManyNewObjects(t *testing.T) {
	env := newE2EEnv(t)
	ctx := context.Background()
	const n = 12
	pods := make([]*runtimewatchtest.Pod, n)
	for i := range pods {
		pods[i] = env.startPod(ctx, t, fmt.Sprintf("many-%d", i), false, runtimewatchtest.Container{Name: "app", Script: "sleep 600"})
	}
	for _, p := range pods {
		if err := env.rs.StopPodSandbox(ctx, p.SandboxID); err != nil {
			t.Fatalf("stop sandbox of %s: %v", p.Name, err)
		}
	}
	// A fresh watcher, as after a restart: nothing cached.
	m := New(env.rs, Options{PodLogsDir: env.podLogsDir})
	began := time.Now()
	all, err := m.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	concurrent := time.Since(began)
	for _, p := range pods {
		st := all[p.UID]
		if st == nil || len(st.Sandboxes) != 1 || len(st.Containers) != 1 {
			t.Fatalf("pod %s: status %+v, want its sandbox and its container", p.Name, st)
		}
		if s := st.Sandboxes[0]; s.ID != p.SandboxID || s.State != podplan.SandboxStateNotReady {
			t.Errorf("pod %s: sandbox %s in state %v, want %s NOTREADY", p.Name, s.ID, s.State, p.SandboxID)
		}
		if c := st.Containers[0]; c.ID != p.Containers["app"] || c.State != podplan.ContainerStateExited || c.FinishedAt.IsZero() || c.Name != "app" {
			t.Errorf("pod %s: container %+v, want %s EXITED with its finish time", p.Name, c, p.Containers["app"])
		}
	}
	began = time.Now()
	for _, p := range pods {
		if _, err := env.rs.PodSandboxStatus(ctx, p.SandboxID, false); err != nil {
			t.Fatal(err)
		}
		if _, err := env.rs.ContainerStatus(ctx, p.Containers["app"], false); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d dead pods: first relist %v (statuses %d at a time); the same %d status calls one after the other %v",
		n, concurrent.Round(time.Millisecond), statusReadsInFlight, 2*n, time.Since(began).Round(time.Millisecond))
}
