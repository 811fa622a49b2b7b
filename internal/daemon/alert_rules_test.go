package daemon

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// alertRulesHeading starts the section of docs/observability.md whose
// first YAML block is the example alert rules.
const alertRulesHeading = "### Alert rules"

// ruleFile is a Prometheus rule file, its fields as Prometheus documents
// them, so that a misspelt field fails the strict decoding.
type ruleFile struct {
	Groups []struct {
		Name        string `json:"name"`
		Interval    string `json:"interval"`
		Limit       int    `json:"limit"`
		QueryOffset string `json:"query_offset"`
		Rules       []struct {
			Record        string            `json:"record"`
			Alert         string            `json:"alert"`
			Expr          string            `json:"expr"`
			For           string            `json:"for"`
			KeepFiringFor string            `json:"keep_firing_for"`
			Labels        map[string]string `json:"labels"`
			Annotations   map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// TestAlertRules keeps the example alert rules of docs/observability.md
// naming only metrics berth registers: a metric renamed or removed fails
// it until the rules follow.
func TestAlertRules(t *testing.T) {
	page, err := os.ReadFile(metricsPage)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "\n"+alertRulesHeading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", metricsPage, alertRulesHeading)
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	block, _, closed := strings.Cut(block, "```")
	if !ok || !closed {
		t.Fatalf("%s: no ```yaml block under %q", metricsPage, alertRulesHeading)
	}
	var rules ruleFile
	if err := yaml.UnmarshalStrict([]byte(block), &rules); err != nil {
		t.Fatalf("%s: the alert rules: %v", metricsPage, err)
	}
	known := map[string]string{}
	for _, m := range registeredMetrics(t) {
		known[m.name] = m.kind
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" {
				t.Errorf("group %s: a rule without an alert name", g.Name)
			}
			if err := checkExprMetrics(r.Expr, known); err != nil {
				t.Errorf("alert %s: %v", r.Alert, err)
			}
		}
	}
	if n == 0 {
		t.Fatalf("%s: no alert rules", metricsPage)
	}
}

var (
	// promString is a PromQL string literal: label values, never names.
	promString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	// berthName is a berth metric name where PromQL allows one.
	berthName = regexp.MustCompile(`\bberth_[a-zA-Z0-9_:]*`)
)

// checkExprMetrics checks that expr names at least one berth metric and
// only registered ones: a family of known (name to type), or a
// histogram's _bucket, _count or _sum series, or a summary's _count or
// _sum.
func checkExprMetrics(expr string, known map[string]string) error {
	names := berthName.FindAllString(promString.ReplaceAllString(expr, `""`), -1)
	if len(names) == 0 {
		return fmt.Errorf("%q names no berth metric", expr)
	}
	for _, name := range names {
		if _, ok := known[name]; ok {
			continue
		}
		found := false
		for suffix, kinds := range map[string][]string{"_bucket": {"histogram"}, "_count": {"histogram", "summary"}, "_sum": {"histogram", "summary"}} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				for _, k := range kinds {
					found = found || known[base] == k
				}
			}
		}
		if !found {
			return fmt.Errorf("%q names %s, which berth does not export", expr, name)
		}
	}
	return nil
}

func TestCheckExprMetrics(t *testing.T) {
	known := map[string]string{"berth_running_pods": "gauge", "berth_start_seconds": "histogram", "berth_x_total": "counter"}
	for _, tt := range []struct {
		expr string
		ok   bool
	}{
		{`berth_running_pods > 0`, true},
		{`rate(berth_x_total[5m])`, true},
		{`sum by (le) (rate(berth_start_seconds_bucket{le="5"}[1h])) / berth_start_seconds_count`, true},
		{`berth_x_total{source="berth_not_a_metric"} > 0`, true},
		{`berth_gone > 0`, false},
		{`berth_running_pods_bucket`, false},
		{`berth_x_total_sum`, false},
		{`up == 0`, false},
	} {
		if err := checkExprMetrics(tt.expr, known); (err == nil) != tt.ok {
			t.Errorf("checkExprMetrics(%q) = %v, want ok %v", tt.expr, err, tt.ok)
		}
	}
}
