package amp

import (
	"math"
	"testing"
)

// bits returns the IEEE bit patterns of vs, for bit-exact comparisons (NaN payloads and signed zeros included).
func bits(vs []float32) []uint32 {
	out := make([]uint32, len(vs))
	for i, v := range vs {
		out[i] = math.Float32bits(v)
	}
	return out
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
