package cpu

import (
	"testing"

	"github.com/tune-ml/tune/tensor"
)

func TestElementwiseGradients(t *testing.T) {
	rng := newRNG(t)
	for _, n := range oddSizes {
		a, bv, g := randn(rng, n, 1), randn(rng, n, 1), randn(rng, n, 1)
		y := make([]float64, n)
		const alpha = -0.75
		t.Run("Add", func(t *testing.T) {
			checkGrad(t, rng, func() float64 { addKernel(y, a, bv); return dot(g, y) }, gradInput{"a", a, g}, gradInput{"b", bv, g})
		})
		t.Run("Axpy", func(t *testing.T) {
			dx, dy := make([]float64, n), append([]float64(nil), g...)
			axpyKernel(dx, g, alpha)
			checkGrad(t, rng, func() float64 { copy(y, a); axpyKernel(y, bv, alpha); return dot(g, y) },
				gradInput{"y", a, dy}, gradInput{"x", bv, dx})
		})
		t.Run("Scale", func(t *testing.T) {
			dx := append([]float64(nil), g...)
			scaleKernel(dx, alpha)
			checkGrad(t, rng, func() float64 { copy(y, a); scaleKernel(y, alpha); return dot(g, y) }, gradInput{"x", a, dx})
		})
	}
}

func TestBiasGradients(t *testing.T) {
	rng := newRNG(t)
	for _, n := range oddSizes {
		c := pick(rng)
		y0, bias, g := randn(rng, n*c, 1), randn(rng, c, 1), randn(rng, n*c, 1)
		y := make([]float64, n*c)
		dbias := make([]float64, c)
		biasGradKernel(dbias, g)
		checkGrad(t, rng, func() float64 { copy(y, y0); biasAddKernel(y, bias); return dot(g, y) },
			gradInput{"y", y0, g}, gradInput{"bias", bias, dbias})
	}
}

func TestElementwiseOps(t *testing.T) {
	b := New()
	cases := []struct {
		name string
		dt   tensor.DType
		run  func(x, y *tensor.Tensor) (*tensor.Tensor, error)
		want []float64
	}{
		{"Add into a BF16 residual, in place", tensor.BF16, func(x, y *tensor.Tensor) (*tensor.Tensor, error) { return x, b.Add(x, x, y) }, []float64{11, 22, 33, 44, 55, 66}},
		{"Axpy accumulates", tensor.F32, func(x, y *tensor.Tensor) (*tensor.Tensor, error) { return x, b.Axpy(x, y, 0.5) }, []float64{6, 12, 18, 24, 30, 36}},
		{"Scale in F16", tensor.F16, func(x, _ *tensor.Tensor) (*tensor.Tensor, error) { return x, b.Scale(x, -2) }, []float64{-2, -4, -6, -8, -10, -12}},
		{"BiasAdd broadcasts over rows", tensor.F32, func(x, _ *tensor.Tensor) (*tensor.Tensor, error) {
			return x, b.BiasAdd(x, put(t, b, tensor.BF16, []float32{100, 200, 300}, 3))
		}, []float64{101, 202, 303, 104, 205, 306}},
		{"BiasGrad sums rows into dbias (+=)", tensor.F32, func(x, _ *tensor.Tensor) (*tensor.Tensor, error) {
			db := put(t, b, tensor.F32, []float32{1000, 1000, 1000}, 3)
			return db, b.BiasGrad(db, x)
		}, []float64{1005, 1007, 1009}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := put(t, b, c.dt, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
			y := put(t, b, tensor.F32, []float32{10, 20, 30, 40, 50, 60}, 2, 3)
			out, err := c.run(x, y)
			if err != nil {
				t.Fatal(err)
			}
			near(t, "out", get(t, b, out), c.want, 0)
		})
	}
	if err := b.BiasAdd(mustAlloc(t, b, tensor.F32, 2, 3), mustAlloc(t, b, tensor.F32, 2)); !errorIs(err, tensor.ErrShape) {
		t.Errorf("BiasAdd with a bias of the wrong length: err = %v, want ErrShape", err)
	}
	if err := b.Add(mustAlloc(t, b, tensor.F32, 3), mustAlloc(t, b, tensor.I32, 3), mustAlloc(t, b, tensor.F32, 3)); !errorIs(err, tensor.ErrDType) {
		t.Errorf("Add of an integer tensor: err = %v, want ErrDType", err)
	}
}
