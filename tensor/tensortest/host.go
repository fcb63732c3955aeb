package tensortest

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// Alloc allocates a zero tensor of dtype dt and shape on b, failing the test on error.
func Alloc(t testing.TB, b tensor.Backend, dt tensor.DType, shape ...int) *tensor.Tensor {
	t.Helper()
	x, err := b.Alloc(dt, shape...)
	if err != nil {
		t.Fatalf("%s: Alloc %v %v: %v", b.Name(), dt, shape, err)
	}
	return x
}

// Upload allocates a tensor of dtype dt and shape on b holding vals (rounded to nearest even for F16 and BF16,
// as Backend.Upload does), failing the test on error. With no shape the tensor is 1-D of len(vals).
func Upload(t testing.TB, b tensor.Backend, dt tensor.DType, vals []float32, shape ...int) *tensor.Tensor {
	t.Helper()
	if len(shape) == 0 {
		shape = []int{len(vals)}
	}
	x := Alloc(t, b, dt, shape...)
	if err := b.Upload(x, vals); err != nil {
		t.Fatalf("%s: Upload: %v", b.Name(), err)
	}
	return x
}

// Download returns the values of the float tensor x (F32, F16 or BF16) widened exactly to float32, failing the
// test on error.
func Download(t testing.TB, b tensor.Backend, x *tensor.Tensor) []float32 {
	t.Helper()
	v := make([]float32, x.Numel())
	if err := b.Download(v, x); err != nil {
		t.Fatalf("%s: Download: %v", b.Name(), err)
	}
	return v
}

// MaxAbsDiff returns max|a[i] − b[i]| and max|b[i]| over the elements of b (a must be at least as long). A NaN
// difference (NaN on either side) makes diff NaN.
func MaxAbsDiff(a, b []float32) (diff, ref float64) {
	diff, ref, _ = maxAbsDiff(a, b)
	return diff, ref
}

// RelErr returns the per-tensor relative error max|a − b| / max|b| (the absolute error when b is all zeros),
// and the index of the worst element. A NaN difference makes the error NaN.
func RelErr(a, b []float32) (float64, int) {
	diff, ref, worst := maxAbsDiff(a, b)
	if ref == 0 {
		return diff, worst
	}
	return diff / ref, worst
}

// maxAbsDiff is MaxAbsDiff with the index of the largest (or last NaN) difference.
func maxAbsDiff(a, b []float32) (diff, ref float64, worst int) {
	for i := range b {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if d > diff || math.IsNaN(d) {
			diff, worst = d, i
		}
		ref = math.Max(ref, math.Abs(float64(b[i])))
	}
	return diff, ref, worst
}
