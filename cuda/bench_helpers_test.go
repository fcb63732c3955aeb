//go:build cuda

package cuda_test

import (
	"sort"
	"testing"

	"github.com/tune-ml/tune/cuda"
)

// medianMs runs fn warm times untimed, then b.N times each timed with CUDA events (Backend.Time), and returns
// the median in milliseconds: the one timing loop of the kernel microbenchmarks. It resets b's timer before
// the timed calls and stops it after them.
func medianMs(b *testing.B, gpu *cuda.Backend, warm int, fn func() error) float64 {
	b.Helper()
	for i := 0; i < warm; i++ {
		if err := fn(); err != nil {
			b.Fatal(err)
		}
	}
	if err := gpu.Synchronize(); err != nil {
		b.Fatal(err)
	}
	times := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ms, err := gpu.Time(fn)
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, ms)
	}
	b.StopTimer()
	sort.Float64s(times)
	return times[len(times)/2]
}
