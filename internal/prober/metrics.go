package prober

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// probeMetrics are the kubelet's prober series under berth's prefix. The
// counter is per container, like the kubelet's, and its series go with
// the pod; the duration histogram is per probe kind only, so 100 probed
// pods do not make thousands of bucket series.
type probeMetrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newProbeMetrics(reg prometheus.Registerer) *probeMetrics {
	m := &probeMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_prober_probe_total", Help: "Probes run, by kind (liveness, readiness, startup), result (successful, failed, unknown) and container.",
		}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "berth_prober_probe_duration_seconds", Help: "Duration of one probe, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 10),
		}, []string{"probe_type"}),
	}
	reg.MustRegister(m.total, m.duration)
	return m
}

// observe counts one probe run of worker w.
func (m *probeMetrics) observe(w *worker, r Result, took time.Duration) {
	m.total.WithLabelValues(w.kind.label(), r.label(), w.container, w.name, w.namespace, string(w.uid)).Inc()
	m.duration.WithLabelValues(w.kind.label()).Observe(took.Seconds())
}

// forget drops a removed pod's series.
func (m *probeMetrics) forget(pod *v1.Pod) {
	m.total.DeletePartialMatch(prometheus.Labels{"pod_uid": string(pod.UID)})
}
