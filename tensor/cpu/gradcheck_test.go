package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// This file holds the gradient checker: an op's analytic backward, run through the float64 instantiation of
// the same generic kernels the backend runs in float32, against central finite differences of a scalar loss
// L = Σ g·f(x) in float64.

// gradInput is one differentiable input of a loss: its values (perturbed in place by the checker) and the
// analytic gradient dL/dx computed by the backward kernels.
type gradInput struct {
	name string
	x    []float64
	grad []float64
}

// gradTol is the agreement required between analytic and numeric derivatives: |a − n| ≤ atol + rtol·max(|a|,|n|).
const (
	gradAtol = 1e-6
	gradRtol = 1e-5
	// maxProbes bounds the finite-difference probes per input (a random subset of a large input).
	maxProbes = 48
)

// gradMismatch returns a description of the worst disagreement between each input's analytic gradient and
// the central difference (L(x+h) − L(x−h))/2h, h = 1e-6·max(1, |x|), or "" when all agree within tolerance.
func gradMismatch(rng *rand.Rand, loss func() float64, ins ...gradInput) string {
	worst, where := 0.0, ""
	for _, in := range ins {
		if len(in.grad) != len(in.x) {
			return fmt.Sprintf("%s: analytic gradient has %d elements, input %d", in.name, len(in.grad), len(in.x))
		}
		for _, i := range probes(rng, len(in.x)) {
			v := in.x[i]
			h := 1e-6 * max(1, math.Abs(v))
			in.x[i] = v + h
			lp := loss()
			in.x[i] = v - h
			lm := loss()
			in.x[i] = v
			num := (lp - lm) / (2 * h)
			ana := in.grad[i]
			excess := math.Abs(ana-num) / (gradAtol + gradRtol*max(math.Abs(ana), math.Abs(num)))
			if math.IsNaN(excess) || excess > worst {
				worst = excess
				where = fmt.Sprintf("%s[%d]: analytic %.10g, numeric %.10g", in.name, i, ana, num)
				if math.IsNaN(excess) {
					return where
				}
			}
		}
	}
	if worst > 1 {
		return where
	}
	return ""
}

// probes returns every index below n when n is small, else the first, the last and random others.
func probes(rng *rand.Rand, n int) []int {
	if n <= maxProbes {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	idx := []int{0, n - 1}
	for len(idx) < maxProbes {
		idx = append(idx, rng.IntN(n))
	}
	return idx
}

// checkGrad fails t with the worst mismatch, if any.
func checkGrad(t *testing.T, rng *rand.Rand, loss func() float64, ins ...gradInput) {
	t.Helper()
	if msg := gradMismatch(rng, loss, ins...); msg != "" {
		t.Errorf("gradient mismatch: %s", msg)
	}
}

// dot returns Σ g·y, the loss whose gradient with respect to y is g.
func dot(g, y []float64) float64 {
	var s float64
	for i := range g {
		s += g[i] * y[i]
	}
	return s
}

// randn returns n standard normal values scaled by s.
func randn(rng *rand.Rand, n int, s float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = s * rng.NormFloat64()
	}
	return v
}

// oddSizes are the extents the checks draw shapes from: 1, small odd, and one past a power of two.
var oddSizes = []int{1, 3, 7, 33}

func pick(rng *rand.Rand) int { return oddSizes[rng.IntN(len(oddSizes))] }

func newRNG(t *testing.T) *rand.Rand {
	h := uint64(14695981039346656037)
	for _, c := range t.Name() {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return rand.New(rand.NewPCG(h, 2024))
}

// TestGradCheckerCatchesWrongGradients is the checker's negative control: a backward that is slightly
// wrong (GELU's tanh approximation instead of the erf form, or a gradient off by 0.1%) must be reported.
func TestGradCheckerCatchesWrongGradients(t *testing.T) {
	rng := newRNG(t)
	x := randn(rng, 33, 2)
	g := randn(rng, 33, 1)
	y := make([]float64, 33)
	loss := func() float64 { geluKernel(y, x); return dot(g, y) }
	cases := []struct {
		name  string
		wrong func(dx []float64)
	}{
		{"tanh-approximate GELU derivative", func(dx []float64) {
			for i, v := range x {
				u := math.Sqrt(2/math.Pi) * (v + 0.044715*v*v*v)
				th := math.Tanh(u)
				d := 0.5*(1+th) + 0.5*v*(1-th*th)*math.Sqrt(2/math.Pi)*(1+3*0.044715*v*v)
				dx[i] = g[i] * d
			}
		}},
		{"gradient scaled by 1.001", func(dx []float64) {
			geluBackwardKernel(dx, g, x)
			scaleKernel(dx, 1.001)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dx := make([]float64, 33)
			c.wrong(dx)
			if msg := gradMismatch(rng, loss, gradInput{"x", x, dx}); msg == "" {
				t.Fatal("the checker accepted a wrong gradient")
			}
		})
	}
	right := make([]float64, 33)
	geluBackwardKernel(right, g, x)
	if msg := gradMismatch(rng, loss, gradInput{"x", x, right}); msg != "" {
		t.Fatalf("the checker rejected the right gradient: %s", msg)
	}
}
