package podworkers

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/podplan"
)

// startup is the pod start SLI's record of one pod, the kubelet's
// pod startup latency tracker (pkg/kubelet/util/pod_startup_latency_tracker.go)
// adapted to static pods: the pod is created when berth first saw its UID
// (the config.seen annotation), and only a pod of which nothing was on the
// runtime when its lane first looked is tracked, as the kubelet tracks
// only pods it had not started (not the pods it finds after a restart).
// It belongs to the lane's goroutine and goes with the lane, so a removed
// UID leaves nothing behind.
type startup struct {
	// pulling is the time the lane's syncs spent pulling images so far.
	pulling time.Duration
}

// newStartup is the record of a pod whose lane first found status on the
// runtime, nil when something of the pod was there already.
func newStartup(status *podplan.PodStatus) *startup {
	if len(status.Sandboxes) > 0 || len(status.Containers) > 0 {
		return nil
	}
	return &startup{}
}

// podStarted says whether every container of pod has been started, the
// kubelet's hasPodStartedSLO: all are running with a start time (init
// containers, which must have finished first, are not counted).
func podStarted(pod *v1.Pod, st v1.PodStatus) bool {
	if len(st.ContainerStatuses) != len(pod.Spec.Containers) {
		return false
	}
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running == nil || cs.State.Running.StartedAt.IsZero() {
			return false
		}
	}
	return true
}

// startDurations are a started pod's start latencies, from created to now:
// the whole (total), and the SLI's, which leaves out the time spent
// pulling images and running init containers (never below 0). sli is
// false for a stateful pod, one with a volume other than a Secret,
// ConfigMap, downward API or emptyDir, which the SLI leaves out as the
// kubelet's isStatefulPod does (a hostPath makes most control-plane static
// pods stateful).
func startDurations(pod *v1.Pod, st v1.PodStatus, created, now time.Time, pulling time.Duration) (total, sliDuration time.Duration, sli bool) {
	total = now.Sub(created)
	sliDuration = total - pulling - initRuntime(st)
	return total, max(sliDuration, 0), !statefulPod(pod)
}

// initRuntime is how long the pod's init containers ran, from the last run
// of each its status shows finished; restartable (sidecar) init containers
// still run and count nothing.
func initRuntime(st v1.PodStatus) time.Duration {
	var d time.Duration
	for _, cs := range st.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			d += max(t.FinishedAt.Sub(t.StartedAt.Time), 0)
		}
	}
	return d
}

// statefulPod is the kubelet's isStatefulPod: the pod mounts a volume
// other than a Secret, ConfigMap, downward API or emptyDir.
func statefulPod(pod *v1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Secret == nil && v.ConfigMap == nil && v.DownwardAPI == nil && v.EmptyDir == nil {
			return true
		}
	}
	return false
}
