package bench

import (
	"math"
	"sort"
)

// Summary is the spread of one figure's samples, as the table prints it.
type Summary struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	P95    float64 `json:"p95"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
}

// summarize computes the spread of samples. The p95 is the nearest-rank
// value (with 20 runs: the 19th), so every number printed is a real
// observation rather than an interpolation between two runs.
func summarize(samples []float64) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	return Summary{
		N:      len(s),
		Min:    s[0],
		Median: median(s),
		P95:    s[rank(len(s), 0.95)],
		Max:    s[len(s)-1],
		Mean:   sum / float64(len(s)),
	}
}

// median of sorted s: the mean of the two middle values for an even count,
// as a median is usually read.
func median(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// rank is the 0-based nearest-rank index of quantile q among n sorted values.
func rank(n int, q float64) int {
	i := int(math.Ceil(q*float64(n))) - 1
	return min(max(i, 0), n-1)
}
