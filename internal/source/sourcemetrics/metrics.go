package sourcemetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-agent/berth/internal/source/signature"
)

// Metrics are the sources' Prometheus series: when each configured
// source last read its manifests, the signed serial it runs, and the
// signed bodies refused. Each gauge has one series per configured source
// (label source: file or http; origin: the manifest path, or the URL as
// podspec.RedactURL prints it), so their number is bounded by the flags.
// The gauges are safe for concurrent use; each series is written only by
// its source's goroutine.
type Metrics struct {
	signature   *signature.Metrics
	lastSuccess *prometheus.GaugeVec
	lastAttempt *prometheus.GaugeVec
	serial      *prometheus.GaugeVec
}

// New registers the sources' series on reg.
func New(reg prometheus.Registerer) *Metrics {
	labels := []string{"source", "origin"}
	m := &Metrics{
		signature: signature.NewMetrics(reg),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_source_last_success_timestamp_seconds",
			Help: "When the source last read its manifests (a URL answering 304 Not Modified counts), in seconds since the epoch; a refused signature or an unreachable URL is no success.",
		}, labels),
		lastAttempt: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_source_last_attempt_timestamp_seconds",
			Help: "When the source last tried to read its manifests, in seconds since the epoch: a success that is old while attempts are recent means the source fails, both old means it stopped trying.",
		}, labels),
		serial: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_source_accepted_serial",
			Help: "The highest serial of a signed body the source accepted (of any of its files for the file source), set when it accepts one; absent while the source takes unsigned bodies.",
		}, labels),
	}
	reg.MustRegister(m.lastSuccess, m.lastAttempt, m.serial)
	return m
}

// Signatures is what the signature checks count refusals on; nil for a
// nil *Metrics, which counts nothing.
func (m *Metrics) Signatures() *signature.Metrics {
	if m == nil {
		return nil
	}
	return m.signature
}

// Read records one attempt of source to read origin at now, and whether
// it succeeded; a nil *Metrics records nothing.
func (m *Metrics) Read(source, origin string, now time.Time, ok bool) {
	if m == nil {
		return
	}
	ts := float64(now.UnixNano()) / 1e9
	m.lastAttempt.WithLabelValues(source, origin).Set(ts)
	if ok {
		m.lastSuccess.WithLabelValues(source, origin).Set(ts)
	}
}

// Accepted records the highest serial source accepted from origin; a nil
// *Metrics records nothing.
func (m *Metrics) Accepted(source, origin string, serial uint64) {
	if m != nil {
		m.serial.WithLabelValues(source, origin).Set(float64(serial))
	}
}
