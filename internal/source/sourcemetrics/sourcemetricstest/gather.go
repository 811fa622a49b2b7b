// Package sourcemetricstest reads the sources' series back from a
// registry, for the sources' tests.
package sourcemetricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Value is the value of the series name{source,origin} in reg, and
// whether it exists.
func Value(t testing.TB, reg prometheus.Gatherer, name, source, origin string) (float64, bool) {
	t.Helper()
	for _, s := range series(t, reg, name) {
		if s.source == source && s.origin == origin {
			return s.value, true
		}
	}
	return 0, false
}

// Count is the number of series of name in reg.
func Count(t testing.TB, reg prometheus.Gatherer, name string) int {
	t.Helper()
	return len(series(t, reg, name))
}

type sample struct {
	source, origin string
	value          float64
}

func series(t testing.TB, reg prometheus.Gatherer, name string) []sample {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	var out []sample
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			s := sample{value: m.GetGauge().GetValue()}
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "source":
					s.source = l.GetValue()
				case "origin":
					s.origin = l.GetValue()
				}
			}
			out = append(out, s)
		}
	}
	return out
}
