package cpu

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

func TestDropoutMaskIsPhilox(t *testing.T) {
	b := New()
	const n = 40001 // several parallel chunks, and not a multiple of 4
	cases := []struct {
		name         string
		p            float32
		seed, offset uint64
	}{
		{"p=0.1 seed 42 offset 0", 0.1, 42, 0},
		{"p=0.5 with a 64-bit seed and offset", 0.5, 0x1234_5678_9abc_def0, 1 << 33},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(i%13) - 6
			}
			X := put(t, b, tensor.F32, x, n)
			Y := mustAlloc(t, b, tensor.F32, n)
			if err := b.Dropout(Y, X, c.p, c.seed, c.offset); err != nil {
				t.Fatal(err)
			}
			got := get(t, b, Y)
			scale := 1 / (1 - c.p)
			kept := 0
			for i, v := range x {
				want := float32(0)
				if tensor.PhiloxKeep(c.seed, c.offset, i, c.p) {
					want = v * scale
					kept++
				}
				if got[i] != want {
					t.Fatalf("element %d = %v, want %v", i, got[i], want)
				}
			}
			if rate := float64(kept) / n; math.Abs(rate-float64(1-c.p)) > 0.01 {
				t.Errorf("kept %.4f of elements, want about %.2f", rate, 1-c.p)
			}
			// The backward regenerates the same mask: dx = dout·keep/(1−p).
			DX := mustAlloc(t, b, tensor.F32, n)
			if err := b.DropoutBackward(DX, X, c.p, c.seed, c.offset); err != nil {
				t.Fatal(err)
			}
			for i, v := range get(t, b, DX) {
				if v != got[i] {
					t.Fatalf("backward element %d = %v, forward gave %v for the same input", i, v, got[i])
				}
			}
		})
	}
}

func TestDropoutEdgeCases(t *testing.T) {
	b := New()
	nan := float32(math.NaN())
	t.Run("p=0 copies, rounding to out's dtype", func(t *testing.T) {
		X := put(t, b, tensor.F32, []float32{1.001, -2, nan}, 3)
		Y := mustAlloc(t, b, tensor.BF16, 3)
		if err := b.Dropout(Y, X, 0, 1, 2); err != nil {
			t.Fatal(err)
		}
		near(t, "out", get(t, b, Y), []float64{float64(tensor.RoundTo(tensor.BF16, 1.001)), -2, math.NaN()}, 0)
	})
	t.Run("a dropped NaN stays NaN (0·NaN), as PyTorch", func(t *testing.T) {
		x := make([]float32, 64)
		for i := range x {
			x[i] = nan
		}
		X := put(t, b, tensor.F32, x, 64)
		if err := b.Dropout(X, X, 0.5, 7, 0); err != nil {
			t.Fatal(err)
		}
		for i, v := range get(t, b, X) {
			if !math.IsNaN(float64(v)) {
				t.Fatalf("element %d = %v, want NaN", i, v)
			}
		}
	})
	for _, p := range []float32{-0.1, 1, nan} {
		X := put(t, b, tensor.F32, []float32{1}, 1)
		if err := b.Dropout(X, X, p, 0, 0); !errorIs(err, tensor.ErrArgument) {
			t.Errorf("p = %v: err = %v, want ErrArgument", p, err)
		}
	}
}

func TestDropoutGradients(t *testing.T) {
	rng := newRNG(t)
	for _, n := range oddSizes {
		for _, p := range []float32{0.1, 0.5} {
			x, g := randn(rng, n, 1), randn(rng, n, 1)
			y, dx := make([]float64, n), make([]float64, n)
			dropoutKernel(dx, g, p, 99, 5, 0)
			checkGrad(t, rng, func() float64 { dropoutKernel(y, x, p, 99, 5, 0); return dot(g, y) }, gradInput{"x", x, dx})
		}
	}
}
