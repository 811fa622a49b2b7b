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

// troughs keeps the lowest of the values v taken at times t (seconds, in
// order) within each period from the first time on, with its time: for a
// Go program's RSS, the level the collector brings it back to, without
// the sawtooth of the heap growing between two collections.
func troughs(t, v []float64, period float64) (tt, tv []float64) {
	last := -1.0 // the period of the trough kept last
	for i := range t {
		k := math.Floor((t[i] - t[0]) / period)
		switch {
		case k != last:
			tt, tv, last = append(tt, t[i]), append(tv, v[i]), k
		case v[i] < tv[len(tv)-1]:
			tt[len(tt)-1], tv[len(tv)-1] = t[i], v[i]
		}
	}
	return tt, tv
}

// trendPerHour is the least-squares slope of values v taken at times t
// (seconds), in units per hour: how fast a figure sampled over a window
// drifts, with every sample weighing in rather than the first and last
// alone. ok is false with fewer than two distinct times.
func trendPerHour(t, v []float64) (slope float64, ok bool) {
	n := float64(len(t))
	if len(t) < 2 || len(t) != len(v) {
		return 0, false
	}
	var st, sv float64
	for i := range t {
		st += t[i]
		sv += v[i]
	}
	mt, mv := st/n, sv/n
	var num, den float64
	for i := range t {
		num += (t[i] - mt) * (v[i] - mv)
		den += (t[i] - mt) * (t[i] - mt)
	}
	if den == 0 {
		return 0, false
	}
	return num / den * 3600, true
}
