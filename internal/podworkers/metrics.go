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
	// The start queue's state (startqueue.go), set by the lanes as it
	// changes: the limit adapts to the runtime, and an operator sees it
	// shrink and pods wait without reading debug logs.
	startLimit     prometheus.Gauge
	startsInFlight prometheus.Gauge
	startsQueued   prometheus.Gauge
}

// latencyBuckets cover 5 ms to about 40 s: pod starts are hundreds of ms.
var latencyBuckets = prometheus.ExponentialBuckets(0.005, 2, 14)

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
			Name: "berth_pod_start_duration_seconds", Help: "Time from berth first seeing a pod to all its containers running.", Buckets: latencyBuckets,
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
		m.podStartDuration, m.startLimit, m.startsInFlight, m.startsQueued)
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
	seen, err := time.Parse(time.RFC3339Nano, pod.Annotations[podspec.AnnotationSeen])
	if err != nil {
		return
	}
	m.podStartDuration.Observe(now.Sub(seen).Seconds())
}
