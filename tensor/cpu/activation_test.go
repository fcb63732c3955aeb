package cpu

import (
	"testing"

	"github.com/tune-ml/tune/tensor"
)

func TestGELUAndTanhValues(t *testing.T) {
	b := New()
	x := []float32{-3, -1, 0, 0.5, 1, 2}
	cases := []struct {
		name string
		run  func(out, in *tensor.Tensor) error
		want []float64
	}{
		// x·Φ(x) to 10 digits (Python math.erf); the tanh approximation would give 0.8411920 at x = 1.
		{"GELU exact erf form", b.GELU, []float64{-0.004049694095, -0.1586552539, 0, 0.3457312306, 0.8413447461, 1.954499736}},
		{"GELU derivative Φ(x)+xφ(x)", func(out, in *tensor.Tensor) error {
			ones := put(t, b, tensor.F32, []float32{1, 1, 1, 1, 1, 1}, 6)
			return b.GELUBackward(out, ones, in)
		}, []float64{-0.0119456472, -0.08331547059, 0.5, 0.8674951247, 1.083315471, 1.085231801}},
		{"Tanh", b.Tanh, []float64{-0.9950547537, -0.7615941560, 0, 0.4621171573, 0.7615941560, 0.9640275801}},
	}
	for _, c := range cases {
		for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				in := put(t, b, tensor.F32, x, 6)
				out := mustAlloc(t, b, dt, 6)
				if err := c.run(out, in); err != nil {
					t.Fatal(err)
				}
				tol := 1e-6
				if dt == tensor.BF16 {
					tol = 1.0 / 256 // half an ulp of bf16 at 1
				}
				near(t, "out", get(t, b, out), c.want, tol)
			})
		}
	}
}

func TestActivationGradients(t *testing.T) {
	rng := newRNG(t)
	for _, n := range oddSizes {
		x, g := randn(rng, n, 2), randn(rng, n, 1)
		y, dx := make([]float64, n), make([]float64, n)
		t.Run("GELU", func(t *testing.T) {
			geluBackwardKernel(dx, g, x)
			checkGrad(t, rng, func() float64 { geluKernel(y, x); return dot(g, y) }, gradInput{"x", x, dx})
		})
		t.Run("Tanh", func(t *testing.T) {
			tanhKernel(y, x)
			tanhBackwardKernel(dx, g, y)
			checkGrad(t, rng, func() float64 { tanhKernel(y, x); return dot(g, y) }, gradInput{"x", x, dx})
		})
	}
}
