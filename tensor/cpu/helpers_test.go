package cpu

import (
	"errors"
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// put allocates a tensor of dtype dt and shape on b and uploads vals (rounded to dt).
func put(t *testing.T, b *Backend, dt tensor.DType, vals []float32, shape ...int) *tensor.Tensor {
	t.Helper()
	x := mustAlloc(t, b, dt, shape...)
	if err := b.Upload(x, vals); err != nil {
		t.Fatal(err)
	}
	return x
}

// get downloads a float tensor as float32.
func get(t *testing.T, b *Backend, x *tensor.Tensor) []float32 {
	t.Helper()
	v := make([]float32, x.Numel())
	if err := b.Download(v, x); err != nil {
		t.Fatal(err)
	}
	return v
}

// f64 and f32s convert between the check's float64 values and the backend's float32 ones.
func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// near reports |got − want| ≤ tol·max(1, |want|) elementwise (NaN equals NaN; infinities must match).
func near(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := float64(got[i]), want[i]
		if math.IsNaN(w) && math.IsNaN(g) || g == w {
			continue
		}
		if math.IsNaN(g) || math.IsInf(w, 0) || math.Abs(g-w) > tol*max(1, math.Abs(w)) {
			t.Fatalf("%s[%d] = %v, want %v (tol %g)", what, i, g, w, tol)
		}
	}
}

// errorIs is errors.Is that also requires a *tensor.OpError.
func errorIs(err, target error) bool {
	var oe *tensor.OpError
	return errors.Is(err, target) && errors.As(err, &oe)
}
