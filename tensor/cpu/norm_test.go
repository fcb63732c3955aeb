package cpu

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

func TestLayerNormGradients(t *testing.T) {
	rng := newRNG(t)
	for _, n := range []int{1, 3, 7} {
		for _, c := range oddSizes {
			x, gamma, beta := randn(rng, n*c, 2), randn(rng, c, 1), randn(rng, c, 1)
			for i := range x {
				x[i] += 3 // a non-zero mean exercises the centring
			}
			g := randn(rng, n*c, 1)
			out, mean, rstd := make([]float64, n*c), make([]float64, n), make([]float64, n)
			const eps = 1e-5
			loss := func() float64 { layerNormKernel(out, mean, rstd, x, gamma, beta, eps); return dot(g, out) }
			loss()
			dx, dgamma, dbeta := make([]float64, n*c), make([]float64, c), make([]float64, c)
			layerNormBackwardKernel(dx, dgamma, dbeta, g, x, gamma, mean, rstd)
			checkGrad(t, rng, loss, gradInput{"x", x, dx}, gradInput{"gamma", gamma, dgamma}, gradInput{"beta", beta, dbeta})
		}
	}
}

func TestLayerNormValues(t *testing.T) {
	b := New()
	// One row [1, 2, 3, 4]: μ = 2.5, biased σ² = 1.25; gamma = 2, beta = 1.
	x := put(t, b, tensor.F32, []float32{1, 2, 3, 4}, 1, 4)
	gamma := put(t, b, tensor.BF16, []float32{2, 2, 2, 2}, 4)
	beta := put(t, b, tensor.F16, []float32{1, 1, 1, 1}, 4)
	out, mean, rstd := mustAlloc(t, b, tensor.F32, 1, 4), mustAlloc(t, b, tensor.F32, 1), mustAlloc(t, b, tensor.F32, 1)
	const eps = 1e-5
	if err := b.LayerNorm(out, mean, rstd, x, gamma, beta, eps); err != nil {
		t.Fatal(err)
	}
	r := 1 / math.Sqrt(1.25+eps)
	near(t, "out", get(t, b, out), []float64{1 - 3*r, 1 - r, 1 + r, 1 + 3*r}, 1e-6)
	near(t, "mean", get(t, b, mean), []float64{2.5}, 1e-7)
	near(t, "rstd", get(t, b, rstd), []float64{r}, 1e-6)
}

// TestLayerNormBackwardChunked runs enough rows for the backend to split the weight-gradient sums into
// chunks, accumulates into non-zero dgamma/dbeta, and compares with the float64 kernel run serially.
func TestLayerNormBackwardChunked(t *testing.T) {
	rng := newRNG(t)
	b := New()
	const n, c = 517, 65
	x, gamma, beta, dout := randn(rng, n*c, 1), randn(rng, c, 1), randn(rng, c, 1), randn(rng, n*c, 1)
	acc := randn(rng, c, 1)
	out, mean, rstd := make([]float64, n*c), make([]float64, n), make([]float64, n)
	layerNormKernel(out, mean, rstd, x, gamma, beta, 1e-5)
	dx, dgamma, dbeta := make([]float64, n*c), append([]float64(nil), acc...), append([]float64(nil), acc...)
	layerNormBackwardKernel(dx, dgamma, dbeta, dout, x, gamma, mean, rstd)

	X, G, B := put(t, b, tensor.F32, f32s(x), n, c), put(t, b, tensor.F32, f32s(gamma), c), put(t, b, tensor.F32, f32s(beta), c)
	O, M, R := mustAlloc(t, b, tensor.F32, n, c), mustAlloc(t, b, tensor.F32, n), mustAlloc(t, b, tensor.F32, n)
	if err := b.LayerNorm(O, M, R, X, G, B, 1e-5); err != nil {
		t.Fatal(err)
	}
	near(t, "out", get(t, b, O), out, 1e-5)
	DO := put(t, b, tensor.F32, f32s(dout), n, c)
	DX := mustAlloc(t, b, tensor.F32, n, c)
	DG, DB := put(t, b, tensor.F32, f32s(acc), c), put(t, b, tensor.F32, f32s(acc), c)
	if err := b.LayerNormBackward(DX, DG, DB, DO, X, G, M, R); err != nil {
		t.Fatal(err)
	}
	near(t, "dx", get(t, b, DX), dx, 1e-4)
	near(t, "dgamma (+=)", get(t, b, DG), dgamma, 1e-4)
	near(t, "dbeta (+=)", get(t, b, DB), dbeta, 1e-4)
	t.Run("frozen LayerNorm: nil dgamma and dbeta", func(t *testing.T) {
		if err := b.LayerNormBackward(DX, nil, nil, DO, X, G, M, R); err != nil {
			t.Fatal(err)
		}
		near(t, "dx", get(t, b, DX), dx, 1e-4)
	})
}
