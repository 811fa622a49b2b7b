package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podspec"
)

// metrics are the agent's Prometheus series, named like the kubelet's with
// berth's prefix where the kubelet has one.
type metrics struct {
	workerDuration          *prometheus.HistogramVec
	loopIterations          *prometheus.CounterVec
	loopDuration            prometheus.Histogram
	relistDuration          prometheus.Histogram
	relistInterval          prometheus.Histogram
	startedPods             prometheus.Counter
	startedPodsErrors       prometheus.Counter
	startedContainers       *prometheus.CounterVec
	startedContainersErrors *prometheus.CounterVec
	podStartDuration        prometheus.Histogram
	// The start queue's state (startqueue.go), set by the pod workers as
	// it changes: the limit adapts to the runtime, and an operator sees
	// it shrink and pods wait without reading debug logs.
	startLimit     prometheus.Gauge
	startsInFlight prometheus.Gauge
	startsQueued   prometheus.Gauge
}

// latencyBuckets cover 5 ms to about 40 s: pod starts are hundreds of ms.
var latencyBuckets = prometheus.ExponentialBuckets(0.005, 2, 14)

// newMetrics registers the agent's series on reg, plus a collector that
// reads pod state at scrape time (so idle berth does no metrics work).
func newMetrics(reg prometheus.Registerer, a *Agent) *metrics {
	m := &metrics{
		workerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "berth_pod_worker_duration_seconds", Help: "Duration of one pod worker step, by operation (sync, terminate, remove).", Buckets: latencyBuckets,
		}, []string{"operation_type"}),
		loopIterations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_sync_loop_iterations_total", Help: "Sync loop iterations, by what woke the loop.",
		}, []string{"trigger"}),
		loopDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_sync_loop_duration_seconds", Help: "Duration of one sync loop iteration (dispatch only; runtime work runs in pod workers).",
			Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10),
		}),
		relistDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_pleg_relist_duration_seconds", Help: "Duration of relisting the runtime's berth-owned pods.", Buckets: latencyBuckets,
		}),
		relistInterval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_pleg_relist_interval_seconds", Help: "Interval between the starts of two relists.", Buckets: latencyBuckets,
		}),
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
	reg.MustRegister(m.workerDuration, m.loopIterations, m.loopDuration, m.relistDuration, m.relistInterval,
		m.startedPods, m.startedPodsErrors, m.startedContainers, m.startedContainersErrors, m.podStartDuration,
		m.startLimit, m.startsInFlight, m.startsQueued, &stateCollector{agent: a})
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

// stateCollector exposes gauges derived from the pod statuses when scraped.
type stateCollector struct{ agent *Agent }

var (
	descRunningPods = prometheus.NewDesc("berth_running_pods", "Pods with a running container.", nil, nil)
	descContainers  = prometheus.NewDesc("berth_running_containers", "Containers of berth's pods by state (running, exited, waiting).", []string{"container_state"}, nil)
	descRestarts    = prometheus.NewDesc("berth_container_restarts", "Restart count of each container of berth's pods.", []string{"namespace", "pod", "container"}, nil)
	descRejected    = prometheus.NewDesc("berth_pods_rejected", "Pods berth refused to run, by reason (OutOfpods, Invalid, DecodeError, ...).", []string{"reason"}, nil)
	descProblems    = prometheus.NewDesc("berth_manifest_problems", "Current manifest problems, and versions that failed on trial (reasons RolledBack, NoReadyVersion), by source and reason.", []string{"source", "reason"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunningPods, descContainers, descRestarts, descRejected, descProblems} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	var runningPods int
	states := map[string]int{"running": 0, "exited": 0, "waiting": 0}
	rejected := map[string]int{}
	for _, p := range c.agent.Pods() {
		if p.UID == "" || p.Status.Reason == "OutOfpods" {
			rejected[p.Status.Reason]++
			continue
		}
		podRunning := false
		for _, cs := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			switch {
			case cs.State.Running != nil:
				states["running"]++
				podRunning = true
			case cs.State.Terminated != nil:
				states["exited"]++
			default:
				states["waiting"]++
			}
			ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.GaugeValue, float64(cs.RestartCount), p.Namespace, p.Name, cs.Name)
		}
		if podRunning {
			runningPods++
		}
	}
	ch <- prometheus.MustNewConstMetric(descRunningPods, prometheus.GaugeValue, float64(runningPods))
	for s, n := range states {
		ch <- prometheus.MustNewConstMetric(descContainers, prometheus.GaugeValue, float64(n), s)
	}
	for r, n := range rejected {
		ch <- prometheus.MustNewConstMetric(descRejected, prometheus.GaugeValue, float64(n), r)
	}
	problems := map[[2]string]int{}
	for _, p := range c.agent.problems() {
		problems[[2]string{p.Source, p.Reason}]++
	}
	for k, n := range problems {
		ch <- prometheus.MustNewConstMetric(descProblems, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}
