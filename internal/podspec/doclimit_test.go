package podspec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
)

func TestMaxDocuments(t *testing.T) {
	for _, tt := range []struct{ maxPods, want int }{{0, 220}, {110, 220}, {1, 16}, {8, 16}, {9, 18}, {1000, 2000}} {
		if got := MaxDocuments(tt.maxPods); got != tt.want {
			t.Errorf("MaxDocuments(%d) = %d, want %d", tt.maxPods, got, tt.want)
		}
	}
}

func TestParseLimited(t *testing.T) {
	origin := Origin{Source: SourceFile, Path: "/m/x.yaml"}
	list := func(n int) []byte {
		var items []string
		for i := range n {
			items = append(items, podspectest.Manifest(fmt.Sprint("p", i), "img:1"))
		}
		return []byte(podspectest.List(items...))
	}
	tests := []struct {
		name    string
		data    []byte
		maxPods int
		pods    int // accepted; -1: refused as TooManyDocuments
	}{
		{"at the floor", podspectest.Pods(16), 1, 16},
		{"past the floor", podspectest.Pods(18), 1, -1},
		{"twice max-pods", podspectest.Pods(20), 10, 20},
		{"past twice max-pods", podspectest.Pods(22), 10, -1},
		{"empty documents count", []byte(strings.Repeat("---\n", 30) + podspectest.Manifest("a", "img:1")), 10, -1},
		{"a PodList within", list(20), 10, 20},
		{"a PodList past it", list(21), 10, -1},
		{"a JSON document", []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"i"}]}}`), 1, 1},
		{"--- inside a block scalar is indented", []byte(podspectest.Manifest("a", "img:1") + "  # ---\n"), 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := ParseLimited(tt.data, origin, podspectest.Node, tt.maxPods)
			if tt.pods < 0 {
				if len(res.Pods) != 0 || len(res.Problems) != 1 || res.Problems[0].Reason != ReasonTooManyDocuments {
					t.Fatalf("got %d pods, problems %v; want only TooManyDocuments", len(res.Pods), res.Problems)
				}
				return
			}
			if len(res.Pods) != tt.pods || len(res.Problems) != 0 {
				t.Fatalf("got %d pods, problems %v; want %d pods", len(res.Pods), res.Problems, tt.pods)
			}
		})
	}
}

// TestParseLimitedRefusesEarly checks 100,000 tiny documents are refused
// without decoding them: a handful of allocations, where decoding them all
// took ~1 GB.
func TestParseLimitedRefusesEarly(t *testing.T) {
	data := podspectest.Pods(100_000)
	origin := Origin{Source: SourceFile, Path: "/m/x.yaml"}
	allocs := testing.AllocsPerRun(3, func() {
		if res := ParseLimited(data, origin, podspectest.Node, DefaultMaxPods); len(res.Pods) != 0 {
			t.Fatal("accepted pods")
		}
	})
	if allocs > 20 {
		t.Errorf("%v allocations to refuse 100,000 documents, want a handful", allocs)
	}
}
