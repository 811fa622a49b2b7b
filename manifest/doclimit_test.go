package manifest

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// tinyPods is a stream of n minimal pod documents, as in the report that
// took the daemon to 940 MB: 100,000 of them are 9.6 MB.
func tinyPods(n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p%d}\nspec: {containers: [{name: c, image: i}]}\n", i)
	}
	return []byte(b.String())
}

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
			items = append(items, podManifest(fmt.Sprint("p", i), "img:1"))
		}
		return []byte(podList(items...))
	}
	tests := []struct {
		name    string
		data    []byte
		maxPods int
		pods    int // accepted; -1: refused as TooManyDocuments
	}{
		{"at the floor", tinyPods(16), 1, 16},
		{"past the floor", tinyPods(18), 1, -1},
		{"twice max-pods", tinyPods(20), 10, 20},
		{"past twice max-pods", tinyPods(22), 10, -1},
		{"empty documents count", []byte(strings.Repeat("---\n", 30) + podManifest("a", "img:1")), 10, -1},
		{"a PodList within", list(20), 10, 20},
		{"a PodList past it", list(21), 10, -1},
		{"a JSON document", []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"i"}]}}`), 1, 1},
		{"--- inside a block scalar is indented", []byte(podManifest("a", "img:1") + "  # ---\n"), 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := ParseLimited(tt.data, origin, testNode, tt.maxPods)
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
	data := tinyPods(100_000)
	origin := Origin{Source: SourceFile, Path: "/m/x.yaml"}
	allocs := testing.AllocsPerRun(3, func() {
		if res := ParseLimited(data, origin, testNode, DefaultMaxPods); len(res.Pods) != 0 {
			t.Fatal("accepted pods")
		}
	})
	if allocs > 20 {
		t.Errorf("%v allocations to refuse 100,000 documents, want a handful", allocs)
	}
}

// TestFileSourceTooManyDocuments checks the file source refuses such a
// file and keeps running the others.
func TestFileSourceTooManyDocuments(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), podManifest("a", "img:1"))
	write(t, filepath.Join(dir, "many.yaml"), string(tinyPods(100_000)))
	store := watchedSource(t, SourceConfig{ManifestPath: dir, MaxPods: 10})
	if got := next(t, store); got != "ADD a-node1 img:1" {
		t.Fatalf("initial: %q", got)
	}
	if got := problemsOf(store); got != "TooManyDocuments many.yaml " {
		t.Errorf("problems %q", got)
	}
}
