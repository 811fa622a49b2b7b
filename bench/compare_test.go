package bench

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/e2e/testbed"
)

// TestComparedTargets: where the compared agent (the kubelet) measured a
// figure in the same run, issue 18's targets relative to the kubelet come
// from its medians, not from the reference figures; the kubelet column
// shows them; and without a compared agent the references stay.
func TestComparedTargets(t *testing.T) {
	floor := &floorResult{best: burstTimes{first: 0.2, median: 3, all: 5}}
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
			r.addBurstRows(prefix, samples, samples, samples, samples, kubeletCold, false, besideRef{})
			r.overheadRow("host", []float64{160}, []float64{150}, kubeletOverheadHost)
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

// TestOverheadRowPaired: the one-pod overhead is each add less the floor's
// add timed beside it, not the difference of two medians taken apart: a
// machine that slows down through the series slows both.
func TestOverheadRowPaired(t *testing.T) {
	r := &runner{res: &Results{}}
	adds := []float64{150, 260, 300, 210}
	floors := []float64{140, 250, 290, 205}
	r.overheadRow("pod", adds, floors, kubeletOverheadPod)
	if len(r.res.Rows) != 1 {
		t.Fatalf("rows %v, want one", r.res.Rows)
	}
	row := r.res.Rows[0]
	want := []float64{10, 10, 10, 5}
	for i, w := range want {
		if row.Samples[i] != w {
			t.Fatalf("samples %v, want %v", row.Samples, want)
		}
	}
	if row.Summary.Median != 10 {
		t.Errorf("median %v, want 10 (the medians' difference would be 7.5)", row.Summary.Median)
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

// TestBurstRowsBesideFloor: a 50-pod figure timed beside the floor is held
// to that floor's medians, and its critical pod to the lone add timed
// beside it; without them, to the floor figure's best and the add
// figure's median.
func TestBurstRowsBesideFloor(t *testing.T) {
	floor := &floorResult{best: burstTimes{first: 0.2, median: 3, all: 5}, dead: burstTimes{median: 3.5, all: 6}, bestK: 4, deadK: 8}
	beside := &burstTimes{first: 0.3, median: 4, all: 6}
	tests := []struct {
		name              string
		dead              bool
		beside            *burstTimes
		add               float64 // the lone add beside, ms
		median, all, crit float64
		note              string
	}{
		{name: "floor figure's best", median: 3.6, all: 5.5, crit: 0.3, note: "over the best floor"},
		{name: "floor figure's best after a power cut", dead: true, median: 4.2, all: 6.6, crit: 0.3, note: "over the best floor after a power cut"},
		{name: "beside", beside: beside, add: 300, median: 4.8, all: 6.6, crit: 0.45, note: "over the floor beside it (4 in flight)"},
		{name: "beside after a power cut", dead: true, beside: beside, add: 400, median: 4.8, all: 6.6, crit: 0.6, note: "over the floor after a power cut beside it (8 in flight)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &runner{res: &Results{}, floor: floor, addPod: 200}
			samples := []float64{1, 2, 3}
			r.addBurstRows("p", samples, samples, samples, samples, kubeletFigures{}, tt.dead, besideRef{floor: tt.beside, add: tt.add})
			limits := map[string]float64{}
			for _, row := range r.res.Rows {
				if row.Target != nil {
					limits[row.Name] = row.Target.Limit
				}
			}
			for name, want := range map[string]float64{"p -> median RUNNING": tt.median, "p -> all RUNNING": tt.all, "p -> critical pod RUNNING": tt.crit} {
				if d := limits[name] - want; d > 1e-9 || d < -1e-9 {
					t.Errorf("%s target = %v, want %v", name, limits[name], want)
				}
			}
			if len(r.res.Notes) != 1 || !strings.Contains(r.res.Notes[0], tt.note) {
				t.Errorf("notes %q, want one with %q", r.res.Notes, tt.note)
			}
		})
	}
}

// TestFloorSeriesBestBound: the floor figure reports, besides each
// figure's best median, the bound whose median and all-50 are together
// nearest the best, the one the 50-pod figures are timed beside.
func TestFloorSeriesBestBound(t *testing.T) {
	tests := []struct {
		name     string
		med, all map[int]float64
		want     int
	}{
		{
			name: "best at both",
			med:  map[int]float64{0: 6, 2: 3.4, 4: 3.2, 8: 3.5},
			all:  map[int]float64{0: 7, 2: 6.6, 4: 6.2, 8: 6.5},
			want: 4,
		},
		{
			// 16 has the best all by 2 % but a median 25 % over the
			// best; 8 is 4 % over on both.
			name: "a best all-50 with a poor median loses",
			med:  map[int]float64{2: 3.2, 8: 3.33, 16: 4},
			all:  map[int]float64{2: 7, 8: 6.24, 16: 6},
			want: 8,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &runner{res: &Results{}, plan: plan{floorRuns: 2}}
			var ks []int
			for k := range tt.all {
				ks = append(ks, k)
			}
			slices.Sort(ks)
			best, k, err := r.floorSeries("f: ", ks, func(k, run int) (burstTimes, error) {
				return burstTimes{first: 0.1, median: tt.med[k], all: tt.all[k]}, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if k != tt.want {
				t.Errorf("best bound %d, want %d", k, tt.want)
			}
			if best.all != slices.Min(slices.Collect(maps.Values(tt.all))) || best.median != slices.Min(slices.Collect(maps.Values(tt.med))) {
				t.Errorf("best %+v, want each figure's smallest median", best)
			}
		})
	}
}

// TestIdleTargets: the idle CPU and RSS targets are a tenth and a fifth of
// the kubelet's, measured in the same run when the compared agent ran the
// idle figure, else of the reference figures; the window's trend and the
// RSS's two parts are rows of their own.
func TestIdleTargets(t *testing.T) {
	const p = "idle 50 pods: "
	tests := []struct {
		name             string
		cmp              []Row
		wantRSS, wantCPU float64
		wantColumn       string
	}{
		{
			name:    "no compared agent: the reference figures",
			wantRSS: kubeletIdleRSS / 5, wantCPU: kubeletIdleCPU / 10,
			wantColumn: "96.5 MiB",
		},
		{
			name: "the kubelet of this run",
			cmp: []Row{
				{Name: p + "agent VmRSS", Samples: []float64{110, 120, 130}},
				{Name: p + "agent CPU", Samples: []float64{2, 3, 4}},
			},
			wantRSS: 24, wantCPU: 0.3,
			wantColumn: "120 MiB (this run)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &runner{res: &Results{}, bed: &testbed.Bed{}, opts: Options{BerthAPI: true}, listen: "127.0.0.1:1"}
			if tt.cmp != nil {
				r.cmp = &runner{res: &Results{}}
				for _, row := range tt.cmp {
					row.Summary = summarize(row.Samples)
					r.cmp.res.Rows = append(r.cmp.res.Rows, row)
				}
			}
			c := idleCost{
				agentCPU: []float64{0.2, 0.2},
				rss:      []float64{30, 30.5, 31}, anon: []float64{12, 12, 12}, file: []float64{18, 18.5, 19},
				at:    []float64{0, 300, 600},
				calls: opCounts{"list_containers": 60}, callsWindow: time.Minute,
			}
			r.addIdle(50, c)
			r.fillCompared()
			rows := map[string]Row{}
			for _, row := range r.res.Rows {
				rows[row.Name] = row
			}
			limit := func(name string) float64 {
				t.Helper()
				row, ok := rows[name]
				if !ok || row.Target == nil {
					t.Fatalf("row %q with a target missing: %+v", name, row)
				}
				return row.Target.Limit
			}
			if got := limit(p + "agent VmRSS"); math.Abs(got-tt.wantRSS) > 1e-9 {
				t.Errorf("RSS target = %v, want %v", got, tt.wantRSS)
			}
			if got := limit(p + "agent CPU"); math.Abs(got-tt.wantCPU) > 1e-9 {
				t.Errorf("CPU target = %v, want %v", got, tt.wantCPU)
			}
			if got := rows[p+"agent VmRSS"].Kubelet; got != tt.wantColumn {
				t.Errorf("kubelet column = %q, want %q", got, tt.wantColumn)
			}
			trend := rows[p+"agent VmRSS trend"]
			if len(trend.Samples) != 1 || math.Abs(trend.Samples[0]-6) > 1e-9 {
				t.Errorf("trend = %v, want 6 MiB/h (1 MiB in 10 minutes)", trend.Samples)
			}
			if trend.Met == nil || *trend.Met {
				t.Errorf("a 6 MiB/h trend met the flat target: %+v", trend)
			}
			if got := rows[p+"agent RssFile (binary)"].Summary.Median; got != 18.5 {
				t.Errorf("RssFile median = %v, want 18.5", got)
			}
		})
	}
}
