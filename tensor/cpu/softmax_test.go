package cpu

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// finfoMin is torch.finfo(torch.float32).min, the mask value transformers uses.
const finfoMin = -3.4028234663852886e38

// maskRows builds a (B, C) additive mask: row b masks its last masked[b] columns with value v.
func maskRows(c int, masked []int, v float64) []float64 {
	m := make([]float64, len(masked)*c)
	for b, k := range masked {
		for j := c - k; j < c; j++ {
			m[b*c+j] = v
		}
	}
	return m
}

func TestSoftmaxGradients(t *testing.T) {
	rng := newRNG(t)
	const c, r = 7, 3 // rows of 7 columns, 3 rows per mask row
	cases := []struct {
		name string
		mask []float64 // (B, C) or nil for B = 1
		b    int
	}{
		{"no mask", nil, 2},
		{"-Inf mask, partial rows", maskRows(c, []int{0, 3}, math.Inf(-1)), 2},
		{"-Inf mask, a fully masked row (zeros, zero gradient)", maskRows(c, []int{2, c}, math.Inf(-1)), 2},
		{"-1e4 mask, partial and full rows", maskRows(c, []int{4, c}, -1e4), 2},
		{"finfo.min mask, partial rows", maskRows(c, []int{1, 6}, finfoMin), 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.b * r
			x, g := randn(rng, n*c, 3), randn(rng, n*c, 1)
			y, dx := make([]float64, n*c), make([]float64, n*c)
			rowsPerMask := r
			if tc.mask == nil {
				rowsPerMask = n
			}
			loss := func() float64 { softmaxKernel(y, x, tc.mask, c, rowsPerMask, 0); return dot(g, y) }
			loss()
			softmaxBackwardKernel(dx, g, y, c)
			checkGrad(t, rng, loss, gradInput{"x", x, dx})
		})
	}
}

func TestSoftmaxMasks(t *testing.T) {
	b := New()
	inf := float32(math.Inf(-1))
	x := []float32{1, 2, 3, 1, 2, 3} // two rows of 3, one per mask row
	e := []float64{math.Exp(1), math.Exp(2), math.Exp(3)}
	cases := []struct {
		name string
		mask []float32
		want []float64
	}{
		{"no mask: rows sum to 1", nil, []float64{e[0] / (e[0] + e[1] + e[2]), e[1] / (e[0] + e[1] + e[2]), e[2] / (e[0] + e[1] + e[2]),
			e[0] / (e[0] + e[1] + e[2]), e[1] / (e[0] + e[1] + e[2]), e[2] / (e[0] + e[1] + e[2])}},
		{"-Inf masks a column exactly; a fully -Inf row gives zeros", []float32{0, 0, inf, inf, inf, inf},
			[]float64{e[0] / (e[0] + e[1]), e[1] / (e[0] + e[1]), 0, 0, 0, 0}},
		{"finfo.min on a full row gives the uniform distribution, as PyTorch", []float32{0, 0, -3.4028235e38, -3.4028235e38, -3.4028235e38, -3.4028235e38},
			[]float64{e[0] / (e[0] + e[1]), e[1] / (e[0] + e[1]), 0, 1.0 / 3, 1.0 / 3, 1.0 / 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			X := put(t, b, tensor.BF16, x, 2, 3)
			var M *tensor.Tensor
			if c.mask != nil {
				M = put(t, b, tensor.F32, c.mask, 2, 3)
			}
			out := mustAlloc(t, b, tensor.F32, 2, 3)
			if err := b.Softmax(out, X, M); err != nil {
				t.Fatal(err)
			}
			near(t, "out", get(t, b, out), c.want, 1e-6)
		})
	}
	t.Run("in place on BF16, mask rows shared by heads", func(t *testing.T) {
		X := put(t, b, tensor.BF16, []float32{1, 2, 3, 1, 2, 3, 0, 0, 0, 0, 0, 0}, 2, 2, 3) // (B=2, R=2, C=3)
		M := put(t, b, tensor.F32, []float32{0, 0, 0, 0, inf, inf}, 2, 3)
		if err := b.Softmax(X, X, M); err != nil {
			t.Fatal(err)
		}
		s := e[0] + e[1] + e[2]
		want := []float64{e[0] / s, e[1] / s, e[2] / s, e[0] / s, e[1] / s, e[2] / s, 1, 0, 0, 1, 0, 0}
		near(t, "out", get(t, b, X), want, 1.0/256)
	})
	t.Run("mask rows must divide x rows", func(t *testing.T) {
		X := put(t, b, tensor.F32, make([]float32, 9), 3, 3)
		M := put(t, b, tensor.F32, make([]float32, 6), 2, 3)
		if err := b.Softmax(X, X, M); !errorIs(err, tensor.ErrShape) {
			t.Fatalf("err = %v, want ErrShape", err)
		}
	})
}
