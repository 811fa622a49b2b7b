package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/config"
	"github.com/berth-agent/berth/internal/criclient"
	"github.com/berth-agent/berth/internal/docscheck"
	"github.com/berth-agent/berth/internal/gc"
	"github.com/berth-agent/berth/internal/handlers"
	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/preload"
	"github.com/berth-agent/berth/internal/source"
	"github.com/berth-agent/berth/internal/statusreport"
	"github.com/berth-agent/berth/internal/store"
	"github.com/berth-agent/berth/internal/syncloop"

	apitest "k8s.io/cri-api/pkg/apis/testing"
)

const (
	metricsPage  = "../../docs/observability.md"
	metricsBegin = "<!-- BEGIN GENERATED: metrics. Edit the metric, then: UPDATE_GOLDEN=1 go test ./internal/daemon -run TestMetricsPage -->"
	metricsEnd   = "<!-- END GENERATED: metrics -->"
)

// TestMetricsPage keeps docs/observability.md's table of metrics equal to
// the series berth registers: a metric added, renamed, re-documented or
// given other labels fails this test until the page is regenerated.
func TestMetricsPage(t *testing.T) {
	if err := docscheck.Generated(metricsPage, metricsBegin, metricsEnd, metricsTable(t), os.Getenv("UPDATE_GOLDEN") == "1"); err != nil {
		t.Errorf("%v\nregenerate it with\n  UPDATE_GOLDEN=1 go test ./internal/daemon -run TestMetricsPage", err)
	}
}

// metric is one series family as the page lists it.
type metric struct {
	name, kind, help string
	labels           []string
}

// metricsTable renders every berth_ family of berth's registry as a
// Markdown table.
func metricsTable(t *testing.T) string {
	t.Helper()
	metrics := registeredMetrics(t)
	var b strings.Builder
	b.WriteString("\n| metric | type | labels | what it counts |\n| --- | --- | --- | --- |\n")
	for i, m := range metrics {
		if !strings.HasPrefix(m.name, "berth_") {
			t.Errorf("metric %s lacks the berth_ prefix", m.name)
		}
		if i > 0 && metrics[i-1].name == m.name {
			t.Errorf("metric %s registered twice", m.name)
		}
		labels := "none"
		if len(m.labels) > 0 {
			labels = "`" + strings.Join(m.labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.name, m.kind, labels, strings.ReplaceAll(m.help, "|", `\|`))
	}
	return b.String()
}

// registeredMetrics builds berth's registry as `berth run` does (the
// sources' metrics, the build info, the instrumented runtime, the agent
// with its garbage collection and status report, the image preloader) over fakes of the
// runtime, and lists its families by name.
func registeredMetrics(t *testing.T) []metric {
	t.Helper()
	rec := &recordingRegisterer{}
	source.NewMetrics(rec)
	syncloop.RegisterBuildInfo(rec, "dev", "")
	rs, is := criclient.Instrument(apitest.NewFakeRuntimeService(), apitest.NewFakeImageService(), rec)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	clk := clock.RealClock{}
	events := podevents.New(clk, log)
	root, logs := t.TempDir(), t.TempDir()
	mgr := kuberuntime.NewManager(rs, is, kuberuntime.Options{NodeName: "node1", RootDir: root, PodLogsDir: logs, Recorder: events, Logger: log})
	s := config.Defaults()
	if _, err := preload.New(preload.Options{Dir: filepath.Join(root, "images"), Metrics: rec, Logger: log}); err != nil {
		t.Fatal(err)
	}
	syncloop.New(syncloop.Config{
		NodeName: "node1",
		Metrics:  rec,
		Logger:   log,
		GC:       s.GCConfig(),
		Status:   &statusreport.Config{URL: "https://fleet.example/status/node1.json"},
	}, store.New(podspec.SourceFile), events, mgr, handlers.NewExecer(rs),
		gc.New(rs, is, mgr, gc.Options{RootDir: root, PodLogsDir: logs, Clock: clk}))

	var metrics []metric
	for _, c := range rec.collectors {
		metrics = append(metrics, describe(t, c)...)
	}
	sort.Slice(metrics, func(i, j int) bool { return metrics[i].name < metrics[j].name })
	return metrics
}

// recordingRegisterer keeps what is registered on it, in order.
type recordingRegisterer struct{ collectors []prometheus.Collector }

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}

func (r *recordingRegisterer) Unregister(prometheus.Collector) bool { return false }

// descRE reads what prometheus.Desc.String prints.
var descRE = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"),(?: unit: "[^"]*",)? constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}\}$`)

// describe lists the families of one collector. A vector's kind says its
// type, a single metric's written form does; a collector of berth's own
// (const metrics built at scrape time) exports counters named _total and
// gauges otherwise, which is checked on what it collects.
func describe(t *testing.T, c prometheus.Collector) []metric {
	t.Helper()
	kind := ""
	custom := false
	switch c := c.(type) {
	case *prometheus.CounterVec:
		kind = "counter"
	case *prometheus.GaugeVec:
		kind = "gauge"
	case *prometheus.HistogramVec:
		kind = "histogram"
	case *prometheus.SummaryVec:
		kind = "summary"
	case prometheus.Metric:
		kind = metricKind(t, c)
	default:
		custom = true
		ch := make(chan prometheus.Metric)
		go func() { c.Collect(ch); close(ch) }()
		for m := range ch {
			name := descName(t, m.Desc())
			if k := metricKind(t, m); k != customKind(name) {
				t.Errorf("%s: a custom collector's metric is a %s; name a counter _total and only a counter", name, k)
			}
		}
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	var out []metric
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		name, err := strconv.Unquote(m[1])
		if err != nil {
			t.Fatal(err)
		}
		help, err := strconv.Unquote(m[2])
		if err != nil {
			t.Fatal(err)
		}
		var labels []string
		if m[3] != "" {
			labels = strings.Split(m[3], ",")
		}
		k := kind
		if custom {
			k = customKind(name)
		}
		out = append(out, metric{name: name, kind: k, help: help, labels: labels})
	}
	return out
}

// metricKind is the type of one metric, from its written form.
func metricKind(t *testing.T, m prometheus.Metric) string {
	t.Helper()
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		t.Fatal(err)
	}
	switch {
	case pb.Counter != nil:
		return "counter"
	case pb.Gauge != nil:
		return "gauge"
	case pb.Histogram != nil:
		return "histogram"
	case pb.Summary != nil:
		return "summary"
	}
	t.Fatalf("%s: a metric of unknown type", m.Desc())
	return ""
}

// customKind is the type of a custom collector's metric, from its name.
func customKind(name string) string {
	if strings.HasSuffix(name, "_total") {
		return "counter"
	}
	return "gauge"
}

// descName is the name of the family d describes.
func descName(t *testing.T, d *prometheus.Desc) string {
	t.Helper()
	m := descRE.FindStringSubmatch(d.String())
	if m == nil {
		t.Fatalf("cannot read %s", d)
	}
	name, err := strconv.Unquote(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return name
}
