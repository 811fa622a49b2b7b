package statusreport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/backoff"
	"github.com/berth-agent/berth/internal/podspec"
)

// Report is the JSON body berth PUTs to --status-url: what a fleet
// operator needs to see which device runs what, and nothing that may be
// secret (no spec, environment, command or message: a problem's message
// may quote a field's value, so it carries the reason and field only).
type Report struct {
	Node         string `json:"node"`
	BerthVersion string `json:"berthVersion,omitempty"`
	// Time is when the report was sent.
	Time time.Time `json:"time"`
	// Ready is /readyz: every source delivered and every pod dispatched.
	Ready bool `json:"ready"`
	// ManifestVersions names the content each source last took: the
	// manifest URL's ETag (else Last-Modified), by source name.
	ManifestVersions map[string]string `json:"manifestVersions,omitempty"`
	Pods             []PodReport       `json:"pods"`
	Problems         []ProblemReport   `json:"problems,omitempty"`
	// Truncated says pods or problems were left out to keep the body
	// within maxStatusReportBytes.
	Truncated bool `json:"truncated,omitempty"`
}

// PodReport is one pod in a Report.
type PodReport struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	UID       string      `json:"uid"`
	Phase     v1.PodPhase `json:"phase"`
	// Ready is "ready/total" containers, as in `berth pods`.
	Ready    string `json:"ready"`
	Restarts int32  `json:"restarts"`
	// Reason is why a container is not running (CrashLoopBackOff,
	// ImagePullBackOff, Error, ...), "" when all are.
	Reason string `json:"reason,omitempty"`
}

// ProblemReport is one manifest problem in a Report.
type ProblemReport struct {
	Source string `json:"source"`
	Origin string `json:"origin"` // file path, or the URL with its secrets redacted
	Line   int    `json:"line,omitempty"`
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
	Pod    string `json:"pod,omitempty"` // namespace/name, when known
}

// Limits of the status report.
const (
	// maxStatusReportBytes bounds one body: the report is a summary, and
	// a fleet's server stores one per device.
	maxStatusReportBytes = 64 << 10
	// DefaultPeriod is how often the report is sent when nothing
	// changes, so the server knows the device is alive.
	DefaultPeriod = 5 * time.Minute
	// statusCheckPeriod is how often the state is compared with the last
	// report sent: a change is noticed within it.
	statusCheckPeriod = 2 * time.Second
	// statusMinInterval debounces changes: at most one report per
	// interval, carrying the latest state, so a 50-pod rollout is a few
	// PUTs, not 50.
	statusMinInterval = 5 * time.Second
	// statusTimeout bounds one PUT, body and answer included.
	statusTimeout = 10 * time.Second
	// statusJitter spreads the periodic reports of a fleet (±10%).
	statusJitter = 0.1
)

// Config configures the status report.
type Config struct {
	// URL is --status-url, placeholders already expanded.
	URL string
	// Header is sent with every PUT (--status-url-header).
	Header http.Header
	// Client makes the PUTs (httpsource.NewHTTPClient with --status-url-ca).
	Client *http.Client
	// Period is --status-period (DefaultPeriod when 0).
	Period time.Duration
	// Rand returns uniform numbers in [0, 1) for the jitter; nil is
	// math/rand/v2.
	Rand    func() float64
	Clock   clock.WithTicker
	Logger  *slog.Logger
	Metrics prometheus.Registerer
}

// Reporter PUTs a Report to a URL after each change (noticed
// within statusCheckPeriod, debounced to statusMinInterval) and every
// period. It runs in its own goroutine and only reads the agent's state
// (snapshot must be safe to call from it), so a slow or dead server never
// holds up the sync loop; a failed PUT is retried with back-off, counted in
// berth_status_reports_total and logged once per change of outcome.
type Reporter struct {
	url      string
	redacted string // the URL as logged
	header   http.Header
	client   *http.Client
	period   time.Duration
	rand     func() float64
	clock    clock.WithTicker
	log      *slog.Logger
	snapshot func() Report
	reports  *prometheus.CounterVec

	// Owned by the goroutine in Run.
	sent     []byte    // last report delivered, without its Time
	nextPut  time.Time // when the periodic report is due; zero before the first check
	notAfter time.Time // no PUT before this (debounce or back-off)
	failures int
	lastErr  string // of the last failed PUT; "" after a success
}

// New builds a reporter of what snapshot returns.
func New(cfg Config, snapshot func() Report) *Reporter {
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry()
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	r := &Reporter{
		url:      cfg.URL,
		redacted: podspec.RedactURL(cfg.URL),
		header:   cfg.Header.Clone(),
		client:   cfg.Client,
		period:   cfg.Period,
		rand:     cfg.Rand,
		clock:    cfg.Clock,
		snapshot: snapshot,
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_status_reports_total", Help: "Status reports PUT to --status-url, by result (ok, error).",
		}, []string{"result"}),
	}
	r.log = cfg.Logger.With("url", r.redacted)
	cfg.Metrics.MustRegister(r.reports)
	return r
}

// Run reports until ctx is done.
func (r *Reporter) Run(ctx context.Context) {
	tick := r.clock.NewTicker(statusCheckPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		r.check(ctx)
	}
}

// check sends the report if it changed since the last one delivered, or
// the periodic report is due, unless the debounce or back-off says wait.
func (r *Reporter) check(ctx context.Context) {
	now := r.clock.Now()
	if r.nextPut.IsZero() {
		// The periodic reports start at a random point of the period,
		// so a fleet started together does not report in step; changes
		// do not move them.
		r.nextPut = now.Add(time.Duration(float64(r.period) * r.rand()))
	}
	rep := r.snapshot()
	body, dropped := boundReport(rep)
	changed := !bytes.Equal(body, r.sent)
	periodic := !now.Before(r.nextPut)
	if now.Before(r.notAfter) || (!changed && !periodic) {
		return
	}
	rep.Time = now.UTC()
	rep.Truncated = dropped
	final, _ := boundReport(rep)
	err := r.put(ctx, final)
	if ctx.Err() != nil {
		return
	}
	now = r.clock.Now()
	if err != nil {
		r.reports.WithLabelValues("error").Inc()
		r.failures++
		// Back off from the debounce interval to the period, equal
		// jitter: a fleet whose server is down does not retry in step.
		r.notAfter = now.Add(backoff.Jittered(statusMinInterval, r.period, r.failures, r.rand()))
		if err.Error() != r.lastErr {
			r.log.Warn("status report failed; retrying with back-off", "err", err)
		}
		r.lastErr = err.Error()
		return
	}
	r.reports.WithLabelValues("ok").Inc()
	if r.lastErr != "" {
		r.log.Info("status report delivered again")
	}
	r.failures, r.lastErr, r.sent = 0, "", body
	r.notAfter = now.Add(statusMinInterval)
	if periodic {
		r.nextPut = now.Add(time.Duration(float64(r.period) * (1 - statusJitter + 2*statusJitter*r.rand())))
	}
}

// put sends one report. The timeout runs on the real clock: it bounds a
// network call, which no test clock drives.
func (r *Reporter) put(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, r.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("PUT %s: %w", r.redacted, err)
	}
	for k, vs := range r.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // its message holds the raw URL
			err = ue.Err
		}
		return fmt.Errorf("PUT %s: %w", r.redacted, err)
	}
	defer resp.Body.Close()
	// Read a little of the answer so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("PUT %s: server answered %s", r.redacted, resp.Status)
	}
	return nil
}

// boundReport encodes rep within maxStatusReportBytes, leaving out
// problems and then pods from the end as needed; dropped says whether any
// was. A report is plain data and always encodes.
func boundReport(rep Report) (body []byte, dropped bool) {
	for {
		body, _ = json.Marshal(rep)
		if len(body) <= maxStatusReportBytes {
			return body, dropped
		}
		dropped, rep.Truncated = true, true
		switch {
		case len(rep.Problems) > 0:
			rep.Problems = rep.Problems[:len(rep.Problems)/2]
		case len(rep.Pods) > 0:
			rep.Pods = rep.Pods[:len(rep.Pods)/2]
		default:
			return body, dropped
		}
	}
}

// PodOf summarizes one pod: phase, ready containers, restarts, and
// the reason of the first container that is not running.
func PodOf(p *v1.Pod) PodReport {
	r := PodReport{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Phase: p.Status.Phase}
	ready := 0
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Ready {
			ready++
		}
		r.Restarts += cs.RestartCount
		if r.Reason != "" {
			continue
		}
		switch {
		case cs.State.Waiting != nil:
			r.Reason = cs.State.Waiting.Reason
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
			r.Reason = cs.State.Terminated.Reason
		}
	}
	r.Ready = fmt.Sprintf("%d/%d", ready, len(p.Spec.Containers))
	return r
}

// ProblemOf is one manifest problem as a report shows it: where and why,
// never its message, which may quote a field's value.
func ProblemOf(pr podspec.Problem) ProblemReport {
	var pod string
	if pr.Name != "" {
		pod = pr.Namespace + "/" + pr.Name
	}
	return ProblemReport{Source: pr.Source, Origin: pr.Origin, Line: pr.Line, Field: pr.Field, Reason: pr.Reason, Pod: pod}
}
