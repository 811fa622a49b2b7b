package syncloop

import (
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// metrics are the agent's Prometheus series, named like the kubelet's with
// berth's prefix where the kubelet has one.
type metrics struct {
	loopIterations *prometheus.CounterVec
	loopDuration   prometheus.Histogram
	relistDuration prometheus.Histogram
	relistInterval prometheus.Histogram
}

// latencyBuckets cover 5 ms to about 40 s: a relist takes milliseconds,
// and its interval is a second or more.
var latencyBuckets = prometheus.ExponentialBuckets(0.005, 2, 14)

// newMetrics registers the agent's series on reg, plus a collector that
// reads pod state at scrape time (so idle berth does no metrics work).
func newMetrics(reg prometheus.Registerer, a *Loop) *metrics {
	m := &metrics{
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
	}
	reg.MustRegister(m.loopIterations, m.loopDuration, m.relistDuration, m.relistInterval, &stateCollector{agent: a})
	return m
}

// stateCollector exposes series derived from the pod statuses when
// scraped: gauges, and counters (named _total) of what the statuses count.
type stateCollector struct{ agent *Loop }

var (
	descRunningPods = prometheus.NewDesc("berth_running_pods", "Pods with a running container.", nil, nil)
	descContainers  = prometheus.NewDesc("berth_running_containers", "Containers of berth's pods by state (running, exited, waiting).", []string{"container_state"}, nil)
	descRestarts    = prometheus.NewDesc("berth_container_restarts_total", "Restarts of each container of berth's pods, its status' restartCount: the series goes with its pod, and starts again from 0 when the pod is replaced (a new version of its manifest), which rate() takes as a counter reset.", []string{"namespace", "pod", "container"}, nil)
	// descRestartsDeprecated is the gauge berth_container_restarts_total
	// replaced, kept one release for the dashboards and alerts that use it.
	descRestartsDeprecated = prometheus.NewDesc("berth_container_restarts", "Deprecated: use berth_container_restarts_total. Restart count of each container of berth's pods.", []string{"namespace", "pod", "container"}, nil)
	descRejected           = prometheus.NewDesc("berth_pods_rejected", "Pods berth refused to run, by reason (OutOfpods, Invalid, DecodeError, ...).", []string{"reason"}, nil)
	descProblems           = prometheus.NewDesc("berth_manifest_problems", "Current manifest problems, and versions that failed on trial (reasons RolledBack, NoReadyVersion), by source and reason.", []string{"source", "reason"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunningPods, descContainers, descRestarts, descRestartsDeprecated, descRejected, descProblems} {
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
			ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(cs.RestartCount), p.Namespace, p.Name, cs.Name)
			ch <- prometheus.MustNewConstMetric(descRestartsDeprecated, prometheus.GaugeValue, float64(cs.RestartCount), p.Namespace, p.Name, cs.Name)
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
	for _, p := range c.agent.Problems() {
		problems[[2]string{p.Source, p.Reason}]++
	}
	for k, n := range problems {
		ch <- prometheus.MustNewConstMetric(descProblems, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}
