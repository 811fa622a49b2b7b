package podspec

import (
	"testing"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
)

// BenchmarkParse1000 decodes, defaults and validates 1,000 manifests.
func BenchmarkParse1000(b *testing.B) {
	var inputs [][]byte
	for i := range 1000 {
		inputs = append(inputs, []byte(podspectest.Sized(i)))
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, in := range inputs {
			if res := Parse(in, webOrigin, podspectest.Node); len(res.Pods) != 1 {
				b.Fatalf("rejected: %v", res.Problems)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "µs/manifest")
}
