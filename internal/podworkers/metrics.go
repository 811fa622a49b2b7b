package podworkers

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podspec"
)

// metrics are the lanes' Prometheus series, named like the kubelet's with
// berth's prefix where the kubelet has one.
type metrics struct {
	workerDuration          *prometheus.HistogramVec
	startedPods             prometheus.Counter
	startedPodsErrors       prometheus.Counter
	startedContainers       *prometheus.CounterVec
	startedContainersErrors *prometheus.CounterVec
	podStartDuration        prometheus.Histogram
	podStartSLIDuration     prometheus.Histogram
	podStartTotalDuration   prometheus.Histogram
	// The start queue's state (startqueue.go), set by the lanes as it
	// changes: the limit adapts to the runtime, and an operator sees it
	// shrink and pods wait without reading debug logs.
	startLimit     prometheus.Gauge
	startsInFlight prometheus.Gauge
	startsQueued   prometheus.Gauge
}

// latencyBuckets cover 5 ms to about 40 s: a worker step takes
// milliseconds to seconds.
var latencyBuckets = prometheus.ExponentialBuckets(0.005, 2, 14)

// podStartupBuckets are the kubelet's for its pod start histograms, round
// numbers from half a second to an hour, so that berth's and the kubelet's
// can be compared bucket by bucket and an SLO's threshold (99% of pods in
// 5 s) is a bucket's edge.
var podStartupBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// newMetrics registers the lanes' series on reg.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		workerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "berth_pod_worker_duration_seconds", Help: "Duration of one pod worker step, by operation (sync, terminate, remove).", Buckets: latencyBuckets,
		}, []string{"operation_type"}),
		startedPods: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_started_pods_total", Help: "Pod sandboxes berth started.",
		}),
		startedPodsErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_started_pods_errors_total", Help: "Pod sandboxes berth failed to start.",
		}),
		startedContainers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_started_containers_total", Help: "Containers berth started, by type (container, init_container).",
		}, []string{"container_type"}),
		startedContainersErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_started_containers_errors_total", Help: "Container starts that failed or were held back, by type and reason (ErrImagePull, CrashLoopBackOff, ...).",
		}, []string{"container_type", "code"}),
		podStartDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_pod_start_duration_seconds", Help: "Duration in seconds from berth seeing a pod for the first time to the pod starting to run (phase Running), as the kubelet's pod_start_duration_seconds.", Buckets: podStartupBuckets,
		}),
		podStartSLIDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_pod_start_sli_duration_seconds", Help: "Duration in seconds to start a pod, excluding time to pull images and run init containers, from berth seeing the pod for the first time to all its containers started, as the kubelet's pod_start_sli_duration_seconds: only pods of which nothing ran when berth first looked, and not pods with volumes other than configMap, secret, downwardAPI and emptyDir.", Buckets: podStartupBuckets,
		}),
		podStartTotalDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_pod_start_total_duration_seconds", Help: "Duration in seconds to start a pod, including time to pull images and run init containers, from berth seeing the pod for the first time to all its containers started, as the kubelet's pod_start_total_duration_seconds: only pods of which nothing ran when berth first looked.", Buckets: podStartupBuckets,
		}),
		startLimit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_pod_start_limit", Help: "Pod starts allowed in flight: --max-parallel-pod-starts, fewer while the runtime gets through starts far slower than it did.",
		}),
		startsInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_pod_starts_in_flight", Help: "Pod starts in flight (a sandbox created and its containers started).",
		}),
		startsQueued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_pod_starts_queued", Help: "Pods waiting for a pod start slot.",
		}),
	}
	reg.MustRegister(m.workerDuration, m.startedPods, m.startedPodsErrors, m.startedContainers, m.startedContainersErrors,
		m.podStartDuration, m.podStartSLIDuration, m.podStartTotalDuration, m.startLimit, m.startsInFlight, m.startsQueued)
	return m
}

// observeSync counts what one SyncPod started or failed to start.
func (m *metrics) observeSync(pod *v1.Pod, res kuberuntime.SyncResult) {
	for _, r := range res.Results {
		switch r.Action {
		case kuberuntime.ActionCreatePodSandbox:
			m.startedPods.Inc()
			if r.Err != nil {
				m.startedPodsErrors.Inc()
			}
		case kuberuntime.ActionStartContainer, kuberuntime.ActionInitContainer:
			typ := "container"
			if r.Action == kuberuntime.ActionInitContainer {
				typ = "init_container"
			}
			if r.Err == nil {
				m.startedContainers.WithLabelValues(typ).Inc()
				continue
			}
			code := "Unknown"
			if se := res.Waiting(r.Target); se != nil {
				code = se.Reason
			}
			m.startedContainersErrors.WithLabelValues(typ, code).Inc()
		}
	}
}

// observeStarted records the pod start latency from the config.seen
// annotation the merge store stamped when the manifest was first read.
func (m *metrics) observeStarted(pod *v1.Pod, now time.Time) {
	seen, ok := seenAt(pod)
	if !ok {
		return
	}
	m.podStartDuration.Observe(now.Sub(seen).Seconds())
}

// observeStartup records the start SLI and total of a pod whose containers
// all started, by now, after pulling images for pulling (startup.go).
func (m *metrics) observeStartup(pod *v1.Pod, st v1.PodStatus, now time.Time, pulling time.Duration) {
	seen, ok := seenAt(pod)
	if !ok {
		return
	}
	total, sliDuration, sli := startDurations(pod, st, seen, now, pulling)
	m.podStartTotalDuration.Observe(total.Seconds())
	if sli {
		m.podStartSLIDuration.Observe(sliDuration.Seconds())
	}
}

// seenAt is when berth first saw pod, from the config.seen annotation the
// merge store stamped.
func seenAt(pod *v1.Pod) (time.Time, bool) {
	seen, err := time.Parse(time.RFC3339Nano, pod.Annotations[podspec.AnnotationSeen])
	return seen, err == nil
}
