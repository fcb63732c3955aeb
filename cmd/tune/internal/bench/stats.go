package bench

import (
	"math"
	"slices"
)

// Percentile returns the q-th percentile (q in [0, 100]) of xs by linear interpolation between the two nearest
// ranks of the sorted values (numpy.percentile's default "linear" method, so tools/reference/bench_pytorch.py
// computes the same statistic): with s sorted and h = (n−1)·q/100, the result is
// s[⌊h⌋] + (h − ⌊h⌋)·(s[⌊h⌋+1] − s[⌊h⌋]).
// It returns NaN for an empty xs or a q outside [0, 100]; xs is not modified.
func Percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 || !(q >= 0 && q <= 100) {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	h := float64(len(s)-1) * q / 100
	lo := int(math.Floor(h))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[lo] + (h-float64(lo))*(s[lo+1]-s[lo])
}

// Summary is the distribution of the timed steps' durations in milliseconds.
type Summary struct {
	Median, P10, P90 float64 // the 50th, 10th and 90th percentiles, in the input's unit (ms)
}

// Summarize returns the median, 10th and 90th percentiles of ms (Percentile).
func Summarize(ms []float64) Summary {
	return Summary{Median: Percentile(ms, 50), P10: Percentile(ms, 10), P90: Percentile(ms, 90)}
}
