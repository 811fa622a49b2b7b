package bench

import (
	"strings"
	"testing"
)

// TestComparedTargets: where the compared agent (the kubelet) measured a
// figure in the same run, issue 18's targets relative to the kubelet come
// from its medians, not from the reference figures; the kubelet column
// shows them; and without a compared agent the references stay.
func TestComparedTargets(t *testing.T) {
	floor := &floorResult{add: map[bool]float64{true: 150, false: 180}, best: burstTimes{first: 0.2, median: 3, all: 5}}
	const prefix = "burst: 50 manifests"
	type want struct {
		first, median, overhead float64 // target limits
		column                  string
	}
	tests := []struct {
		name string
		cmp  []Row // the compared agent's rows; nil: no compared agent
		want want
	}{
		{
			name: "no compared agent: the issue's reference figures",
			want: want{first: 0.70, median: 3.6, overhead: 14.0 / 3, column: "1.40 s"},
		},
		{
			name: "the kubelet's median is the stricter limit",
			cmp: []Row{
				{Name: prefix + " -> first RUNNING", Samples: []float64{1.2, 1.4, 1.6}},
				{Name: prefix + " -> median RUNNING", Samples: []float64{2.5, 2.6, 2.7}},
				{Name: "add: overhead over the floor, host network", Samples: []float64{40, 48, 60}},
			},
			want: want{first: 0.70, median: 2.6, overhead: 16, column: "1.40 s (this run)"},
		},
		{
			name: "the floor's 1.2x is the stricter limit",
			cmp: []Row{
				{Name: prefix + " -> first RUNNING", Samples: []float64{3}},
				{Name: prefix + " -> median RUNNING", Samples: []float64{4}},
			},
			want: want{first: 1.5, median: 3.6, overhead: 14.0 / 3, column: "3 s (this run)"},
		},
		{
			name: "a figure the compared agent could not measure keeps the reference",
			cmp: []Row{
				{Name: prefix + " -> first RUNNING", NA: "needs berth's /pods"},
			},
			want: want{first: 0.70, median: 3.6, overhead: 14.0 / 3, column: "1.40 s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &runner{res: &Results{}, floor: floor}
			if tt.cmp != nil {
				r.cmp = &runner{res: &Results{}}
				for _, row := range tt.cmp {
					row.Summary = summarize(row.Samples)
					r.cmp.res.Rows = append(r.cmp.res.Rows, row)
				}
			}
			samples := []float64{1, 2, 3}
			r.addBurstRows(prefix, samples, samples, samples, samples, kubeletCold, false)
			r.overheadRow("host", []float64{160}, 150, kubeletOverheadHost)
			r.fillCompared()

			limits := map[string]float64{}
			columns := map[string]string{}
			for _, row := range r.res.Rows {
				if row.Target != nil {
					limits[row.Name] = row.Target.Limit
				}
				columns[row.Name] = row.Kubelet
			}
			check := func(what string, got, want float64) {
				t.Helper()
				if d := got - want; d > 1e-9 || d < -1e-9 {
					t.Errorf("%s target = %v, want %v", what, got, want)
				}
			}
			check("first", limits[prefix+" -> first RUNNING"], tt.want.first)
			check("median", limits[prefix+" -> median RUNNING"], tt.want.median)
			check("overhead", limits["add: overhead over the floor, host network"], tt.want.overhead)
			if got := columns[prefix+" -> first RUNNING"]; got != tt.want.column {
				t.Errorf("kubelet column of the first pod = %q, want %q", got, tt.want.column)
			}
			if (r.res.Compared != nil) != (tt.cmp != nil) {
				t.Errorf("compared results kept: %v, want %v", r.res.Compared != nil, tt.cmp != nil)
			}
		})
	}
}

// TestBootOpsRows: a boot's CRI calls are shown per pod of the burst, with
// and without the periodic ones, and not at all when the agent's metrics
// were not read.
func TestBootOpsRows(t *testing.T) {
	r := &runner{res: &Results{}}
	r.bootOpsRows("boot: none", []opCounts{nil})
	if len(r.res.Rows) != 0 || len(r.res.Notes) != 0 {
		t.Fatalf("rows %v, notes %v without metrics; want none", r.res.Rows, r.res.Notes)
	}
	runs := []opCounts{
		{"list_containers": 50, "run_podsandbox": 50, "create_container": 50, "start_container": 50},
		{"list_containers": 150, "run_podsandbox": 50, "create_container": 50, "start_container": 50},
	}
	r.bootOpsRows("boot: x", runs)
	got := map[string][]float64{}
	for _, row := range r.res.Rows {
		got[row.Name] = row.Samples
	}
	want := map[string][]float64{
		"boot: x -> CRI calls per pod until all RUNNING (all)":                    {4, 6},
		"boot: x -> CRI calls per pod until all RUNNING (without periodic calls)": {3, 3},
	}
	for name, w := range want {
		if g := got[name]; len(g) != len(w) || g[0] != w[0] || g[1] != w[1] {
			t.Errorf("%s = %v, want %v", name, g, w)
		}
	}
	if len(r.res.Notes) != 1 || !strings.Contains(r.res.Notes[0], "list_containers 100") {
		t.Errorf("notes %q; want the mean by operation, list_containers 100", r.res.Notes)
	}
}
