package bench

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name    string
		samples []float64
		want    Summary
	}{
		{"empty", nil, Summary{}},
		{"one", []float64{3}, Summary{N: 1, Min: 3, Median: 3, P95: 3, Max: 3, Mean: 3}},
		{"even count averages the middle", []float64{4, 1, 3, 2}, Summary{N: 4, Min: 1, Median: 2.5, P95: 4, Max: 4, Mean: 2.5}},
		{"p95 of 20 is the 19th", []float64{20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1},
			Summary{N: 20, Min: 1, Median: 10.5, P95: 19, Max: 20, Mean: 10.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := summarize(tt.samples); got != tt.want {
				t.Errorf("summarize(%v) = %+v, want %+v", tt.samples, got, tt.want)
			}
		})
	}
}

func TestParseOps(t *testing.T) {
	text := `# HELP berth_runtime_operations_total Cumulative number of CRI operations by operation type.
# TYPE berth_runtime_operations_total counter
berth_runtime_operations_total{operation_type="list_containers"} 12
berth_runtime_operations_total{operation_type="run_podsandbox"} 1
berth_runtime_operations_errors_total{operation_type="run_podsandbox"} 1
berth_runtime_operations_duration_seconds_count{operation_type="list_containers"} 12
`
	got, err := parseOps(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := opCounts{"list_containers": 12, "run_podsandbox": 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseOps = %v, want %v", got, want)
	}
	if d := want.minus(opCounts{"list_containers": 10}); !reflect.DeepEqual(d, opCounts{"list_containers": 2, "run_podsandbox": 1}) {
		t.Errorf("minus = %v", d)
	}
}

// The kubelet's counter has the same operation names under its own
// metric name; its periodic calls are told apart from a pod's work.
func TestParseOpsKubelet(t *testing.T) {
	text := `kubelet_runtime_operations_total{operation_type="container_status"} 4
kubelet_runtime_operations_total{operation_type="list_podsandbox"} 7
kubelet_runtime_operations_total{operation_type="status"} 3
kubelet_runtime_operations_total{operation_type="list_pod_sandbox_stats"} 2
kubelet_runtime_operations_total{operation_type="container_stats"} 2
kubelet_runtime_operations_total{operation_type="image_fs_info"} 1
kubelet_runtime_operations_total{operation_type="version"} 1
kubelet_runtime_operations_total{operation_type="image_status"} 1
kubelet_runtime_operations_errors_total{operation_type="image_status"} 1
`
	got, err := parseOps(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if got.total() != 21 {
		t.Errorf("total = %v, want 21: %v", got.total(), got)
	}
	want := opCounts{"list_podsandbox": 7, "status": 3, "list_pod_sandbox_stats": 2, "container_stats": 2, "image_fs_info": 1, "version": 1}
	if p := got.periodic(); !reflect.DeepEqual(p, want) {
		t.Errorf("periodic = %v, want %v", p, want)
	}
}

func TestParseGoBench(t *testing.T) {
	out := `goos: linux
BenchmarkParse1000-2   	       2	 535446398 ns/op	       535.4 µs/manifest	65581890 B/op	 1169276 allocs/op
BenchmarkRenameToAdd-2 	       1	         0 ns/op	         2.980 ms-median	        18.90 ms-p99
BenchmarkRenameToAdd-2 	       1	         0 ns/op	         3.100 ms-median	        17.00 ms-p99
PASS
`
	samples, order := parseGoBench([]byte(out))
	wantOrder := []string{"BenchmarkParse1000\x00ns/op", "BenchmarkParse1000\x00µs/manifest", "BenchmarkParse1000\x00B/op",
		"BenchmarkParse1000\x00allocs/op", "BenchmarkRenameToAdd\x00ns/op", "BenchmarkRenameToAdd\x00ms-median", "BenchmarkRenameToAdd\x00ms-p99"}
	if !reflect.DeepEqual(order, wantOrder) {
		t.Errorf("order = %q, want %q", order, wantOrder)
	}
	if got := samples["BenchmarkRenameToAdd\x00ms-median"]; !reflect.DeepEqual(got, []float64{2.98, 3.1}) {
		t.Errorf("ms-median samples = %v", got)
	}
}

func TestExpand(t *testing.T) {
	got, err := expand("{bin} run --manifest-url={url} --root-dir {root}", map[string]string{"bin": "/b/berth", "url": "", "root": "/r oot"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/b/berth", "run", "--manifest-url=", "--root-dir", "/r oot"}; !reflect.DeepEqual(got, want) {
		t.Errorf("expand = %q, want %q", got, want)
	}
	if _, err := expand("{bin} --x {typo}", map[string]string{"bin": "b"}); err == nil {
		t.Error("expand accepted an unknown placeholder")
	}
}

// TestTrendPerHour: the least-squares slope in units per hour, from every
// sample, and no trend from fewer than two distinct times.
func TestTrendPerHour(t *testing.T) {
	tests := []struct {
		name   string
		t, v   []float64
		want   float64
		wantOK bool
	}{
		{name: "flat", t: []float64{0, 10, 20}, v: []float64{5, 5, 5}, want: 0, wantOK: true},
		{name: "1 a minute", t: []float64{0, 60, 120}, v: []float64{1, 2, 3}, want: 60, wantOK: true},
		{name: "falling", t: []float64{0, 1800, 3600}, v: []float64{3, 2, 1}, want: -2, wantOK: true},
		{name: "one step at the end weighs by its place", t: []float64{0, 1, 2, 3}, v: []float64{0, 0, 0, 1}, want: 0.3 * 3600, wantOK: true},
		{name: "one sample", t: []float64{0}, v: []float64{1}},
		{name: "one time", t: []float64{5, 5}, v: []float64{1, 2}},
		{name: "lengths differ", t: []float64{0, 1}, v: []float64{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := trendPerHour(tt.t, tt.v)
			if ok != tt.wantOK || math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("trendPerHour = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestTroughs: the lowest value of each period from the first sample on,
// with its time, so the slope follows the level the collector brings the
// RSS back to and not the heap's sawtooth.
func TestTroughs(t *testing.T) {
	tests := []struct {
		name           string
		t, v           []float64
		wantT, wantV   []float64
		wantTrend      float64
		wantTrendKnown bool
	}{
		{
			name:  "a sawtooth on a flat level",
			t:     []float64{0, 20, 40, 60, 80, 100, 120, 140, 160},
			v:     []float64{30, 31, 32, 30, 31, 32, 30, 31, 32},
			wantT: []float64{0, 60, 120}, wantV: []float64{30, 30, 30},
			wantTrend: 0, wantTrendKnown: true,
		},
		{
			name:  "a sawtooth on a rising level",
			t:     []float64{0, 30, 60, 90, 120, 150},
			v:     []float64{31, 30, 32, 31, 33, 32},
			wantT: []float64{30, 90, 150}, wantV: []float64{30, 31, 32},
			wantTrend: 60, wantTrendKnown: true,
		},
		{
			name:  "periods count from the first sample",
			t:     []float64{5, 64, 66},
			v:     []float64{1, 2, 0},
			wantT: []float64{5, 66}, wantV: []float64{1, 0},
			wantTrend: -1 * 3600 / 61.0, wantTrendKnown: true,
		},
		{
			name:  "one period: no trend",
			t:     []float64{0, 10, 20},
			v:     []float64{3, 2, 4},
			wantT: []float64{10}, wantV: []float64{2},
		},
		{name: "no samples"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotT, gotV := troughs(tt.t, tt.v, 60)
			if !slices.Equal(gotT, tt.wantT) || !slices.Equal(gotV, tt.wantV) {
				t.Errorf("troughs = %v %v, want %v %v", gotT, gotV, tt.wantT, tt.wantV)
			}
			trend, ok := trendPerHour(gotT, gotV)
			if ok != tt.wantTrendKnown || math.Abs(trend-tt.wantTrend) > 1e-9 {
				t.Errorf("trend = %v, %v; want %v, %v", trend, ok, tt.wantTrend, tt.wantTrendKnown)
			}
		})
	}
}
