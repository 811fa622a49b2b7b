package podworkers

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podtest"
)

func TestStartDurations(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ran := func(from, to time.Duration) v1.ContainerStatus {
		return v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			StartedAt: metav1.NewTime(created.Add(from)), FinishedAt: metav1.NewTime(created.Add(to))}}}
	}
	for _, tt := range []struct {
		name      string
		volumes   []v1.Volume
		inits     []v1.ContainerStatus
		pulling   time.Duration
		total     time.Duration
		sli       time.Duration
		sliCounts bool
	}{
		{name: "no pulls, no init containers", total: 10 * time.Second, sli: 10 * time.Second, sliCounts: true},
		{name: "pull time left out", pulling: 4 * time.Second, total: 10 * time.Second, sli: 6 * time.Second, sliCounts: true},
		{name: "init containers' run left out", inits: []v1.ContainerStatus{ran(time.Second, 3*time.Second), ran(3*time.Second, 4*time.Second)},
			pulling: time.Second, total: 10 * time.Second, sli: 6 * time.Second, sliCounts: true},
		{name: "a running sidecar counts nothing", inits: []v1.ContainerStatus{{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}},
			total: 10 * time.Second, sli: 10 * time.Second, sliCounts: true},
		{name: "never below 0", pulling: time.Minute, total: 10 * time.Second, sli: 0, sliCounts: true},
		{name: "stateless volumes", volumes: []v1.Volume{
			{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{}}},
			{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
			{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}},
			{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		}, total: 10 * time.Second, sli: 10 * time.Second, sliCounts: true},
		{name: "a hostPath makes the pod stateful", volumes: []v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc"}}}},
			total: 10 * time.Second, sli: 10 * time.Second, sliCounts: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Volumes: tt.volumes}}
			total, sli, counts := startDurations(pod, v1.PodStatus{InitContainerStatuses: tt.inits}, created, created.Add(10*time.Second), tt.pulling)
			if total != tt.total || sli != tt.sli || counts != tt.sliCounts {
				t.Errorf("got total %v, SLI %v (counted %v); want %v, %v (%v)", total, sli, counts, tt.total, tt.sli, tt.sliCounts)
			}
		})
	}
}

func TestPodStarted(t *testing.T) {
	running := v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}}}
	waiting := v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}, {Name: "b"}}}}
	for _, tt := range []struct {
		name     string
		statuses []v1.ContainerStatus
		want     bool
	}{
		{"all running", []v1.ContainerStatus{running, running}, true},
		{"one waiting", []v1.ContainerStatus{running, waiting}, false},
		{"running without a start time", []v1.ContainerStatus{running, {State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}, false},
		{"no statuses yet", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := podStarted(pod, v1.PodStatus{ContainerStatuses: tt.statuses}); got != tt.want {
				t.Errorf("podStarted = %v, want %v", got, tt.want)
			}
		})
	}
}

// startupRuntime starts a pod's one container "app" in one sync that
// pulls its image for pull on the fake clock; a pod in found runs before
// any lane looks, as after a restart of berth.
type startupRuntime struct {
	stubRuntime
	clock *clocktesting.FakeClock
	pull  time.Duration
	mu    sync.Mutex // guards started
	// started is when each pod's container started.
	started map[types.UID]time.Time
}

func (r *startupRuntime) SyncPod(_ context.Context, pod *v1.Pod, status *podplan.PodStatus, plan *podplan.PodActions, _ kuberuntime.SyncOptions) kuberuntime.SyncResult {
	if plan == nil { // as the runtime manager answers it
		return kuberuntime.SyncResult{Results: []kuberuntime.ActionResult{{Action: kuberuntime.ActionSyncPod, Target: pod.Name, Err: kuberuntime.ErrNoPlan}}}
	}
	if len(status.Containers) > 0 {
		return kuberuntime.SyncResult{}
	}
	r.clock.Step(r.pull)
	r.mu.Lock()
	r.started[pod.UID] = r.clock.Now()
	r.mu.Unlock()
	return kuberuntime.SyncResult{Results: []kuberuntime.ActionResult{
		{Action: kuberuntime.ActionCreatePodSandbox, Target: pod.Name},
		{Action: kuberuntime.ActionStartContainer, Target: "app", Pulling: r.pull},
	}}
}

func (r *startupRuntime) PodStatus(_ context.Context, uid types.UID) (*podplan.PodStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.started[uid]
	if !ok {
		return &podplan.PodStatus{UID: uid}, nil
	}
	return &podplan.PodStatus{UID: uid, IPs: []string{"10.0.0.2"},
		Sandboxes:  []*podplan.SandboxStatus{{ID: "sb-" + string(uid), State: podplan.SandboxStateReady, IP: "10.0.0.2", CreatedAt: at}},
		Containers: []*podplan.ContainerStatus{{ID: "c-" + string(uid), SandboxID: "sb-" + string(uid), Name: "app", State: podplan.ContainerStateRunning, CreatedAt: at, StartedAt: at, Image: "busybox:1.36"}},
	}, nil
}

// TestPodWorkersStartSLI: a pod berth starts is observed once in the start
// SLI (its pull left out) and in the total; a pod found running on the
// runtime is observed in neither.
func TestPodWorkersStartSLI(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		rt := &startupRuntime{stubRuntime: *newStubRuntime(), clock: clk, pull: 3 * time.Second,
			started: map[types.UID]time.Time{"found": clk.Now()}}
		ctx, cancel := context.WithCancel(context.Background())
		w := newTestWorkersWith(ctx, workerOptions{rt: rt, clock: podtest.NewAsyncClock(clk)})
		m := newMetrics(prometheus.NewRegistry())
		w.metrics = m
		pod := func(uid types.UID) *v1.Pod {
			p := stubPod(uid, string(uid), "1")
			// Seen a second before: the SLI is that second, the pull left out.
			p.Annotations = map[string]string{podspec.AnnotationSeen: clk.Now().Add(-time.Second).Format(time.RFC3339Nano)}
			return p
		}

		w.Update(pod("new"))
		w.Update(pod("found"))
		waitUntil(t, "both pods running", func() bool {
			for _, uid := range []types.UID{"new", "found"} {
				if p := w.status.Get(uid); p == nil || p.Status.Phase != v1.PodRunning {
					return false
				}
			}
			return true
		})
		w.Update(pod("new")) // a later sync observes nothing more
		synctest.Wait()
		for _, tt := range []struct {
			h         prometheus.Histogram
			count     uint64
			sumSecond float64
		}{
			{m.podStartSLIDuration, 1, 1},
			{m.podStartTotalDuration, 1, 4},
		} {
			if n := testutil.CollectAndCount(tt.h); n != 1 {
				t.Fatalf("%d series", n)
			}
			pb := histogramOf(t, tt.h)
			if pb.GetSampleCount() != tt.count || pb.GetSampleSum() != tt.sumSecond {
				t.Errorf("%d observations summing to %vs, want %d summing to %vs", pb.GetSampleCount(), pb.GetSampleSum(), tt.count, tt.sumSecond)
			}
		}
		cancel()
		w.wait()
	})
}

// histogramOf is h as it would be scraped.
func histogramOf(t *testing.T, h prometheus.Histogram) *dto.Histogram {
	t.Helper()
	var pb dto.Metric
	if err := h.Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram()
}
