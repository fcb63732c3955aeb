package tensortest

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// TestRelErr checks the error measure the model tests share, including its NaN and all-zero cases.
func TestRelErr(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []struct {
		name      string
		a, b      []float32
		diff, ref float64
		rel       float64
		worst     int
	}{
		{"equal", []float32{1, -2}, []float32{1, -2}, 0, 2, 0, 0},
		{"relative to the largest |b|", []float32{1, -2.5, 3}, []float32{1, -2, 4}, 1, 4, 0.25, 2},
		{"absolute when b is all zeros", []float32{0, 0.5}, []float32{0, 0}, 0.5, 0, 0.5, 1},
		{"a NaN in a is the worst", []float32{nan, 2}, []float32{1, 1}, math.NaN(), 1, math.NaN(), 0},
		{"a NaN after a large difference still wins", []float32{9, nan}, []float32{1, 1}, math.NaN(), 1, math.NaN(), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			same := func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) }
			diff, ref := MaxAbsDiff(c.a, c.b)
			rel, worst := RelErr(c.a, c.b)
			if !same(diff, c.diff) || !same(ref, c.ref) || !same(rel, c.rel) || worst != c.worst {
				t.Errorf("MaxAbsDiff = %v, %v; RelErr = %v at %d; want %v, %v; %v at %d", diff, ref, rel, worst,
					c.diff, c.ref, c.rel, c.worst)
			}
		})
	}
}

// TestUploadDownload checks that Upload shapes and rounds as documented and Download widens back.
func TestUploadDownload(t *testing.T) {
	b := cpu.New()
	for _, c := range []struct {
		name  string
		dt    tensor.DType
		vals  []float32
		shape []int
		want  []float32
	}{
		{"F32 with no shape is 1-D", tensor.F32, []float32{1, 2.5, -3}, nil, []float32{1, 2.5, -3}},
		{"F32 with a shape", tensor.F32, []float32{1, 2, 3, 4, 5, 6}, []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}},
		{"BF16 rounds to nearest even", tensor.BF16, []float32{1 + 1.0/256, 1 + 3.0/256}, nil, []float32{1, 1 + 4.0/256}},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := Upload(t, b, c.dt, c.vals, c.shape...)
			wantShape := c.shape
			if wantShape == nil {
				wantShape = []int{len(c.vals)}
			}
			if x.DType != c.dt || len(x.Shape) != len(wantShape) || x.Numel() != len(c.vals) {
				t.Fatalf("Upload gave %v %v, want %v %v", x.DType, x.Shape, c.dt, wantShape)
			}
			got := Download(t, b, x)
			for i := range c.want {
				if got[i] != c.want[i] {
					t.Errorf("element %d: %v, want %v", i, got[i], c.want[i])
				}
			}
		})
	}
}
