package amp

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// upload allocates a tensor of dtype dt and shape on b holding vals (rounded RNE for half dtypes).
func upload(t *testing.T, b tensor.Backend, dt tensor.DType, vals []float32, shape ...int) *tensor.Tensor {
	t.Helper()
	if len(shape) == 0 {
		shape = []int{len(vals)}
	}
	x, err := b.Alloc(dt, shape...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Upload(x, vals); err != nil {
		t.Fatal(err)
	}
	return x
}

// alloc allocates a zero tensor or fails the test.
func alloc(t *testing.T, b tensor.Backend, dt tensor.DType, shape ...int) *tensor.Tensor {
	t.Helper()
	x, err := b.Alloc(dt, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// download returns x's values widened to float32.
func download(t *testing.T, b tensor.Backend, x *tensor.Tensor) []float32 {
	t.Helper()
	out := make([]float32, x.Numel())
	if err := b.Download(out, x); err != nil {
		t.Fatal(err)
	}
	return out
}

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
