package cpu

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// TestAdamWMatchesFloat64Reference runs five AdamW steps over a flat buffer holding a decaying segment, a
// non-decaying one, a frozen gap and another decaying segment, against the textbook update in float64
// (Loshchilov & Hutter's decoupled decay with Adam's bias correction, as torch.optim.AdamW).
func TestAdamWMatchesFloat64Reference(t *testing.T) {
	rng := newRNG(t)
	b := New()
	const n = 13
	segs := []tensor.Segment{{Offset: 10, Len: 3, Decay: true}, {Offset: 0, Len: 5, Decay: true}, {Offset: 5, Len: 3, Decay: false}}
	decays := func(i int) (updated, decay bool) {
		for _, s := range segs {
			if i >= s.Offset && i < s.Offset+s.Len {
				return true, s.Decay
			}
		}
		return false, false
	}
	const lr, b1, b2, eps, wd = 1e-2, 0.9, 0.999, 1e-8, 0.1
	p0 := randn(rng, n, 1)
	p, m, v := append([]float64(nil), p0...), make([]float64, n), make([]float64, n)
	P, G := put(t, b, tensor.F32, f32s(p0), n), mustAlloc(t, b, tensor.F32, n)
	M, V := mustAlloc(t, b, tensor.F32, n), mustAlloc(t, b, tensor.F32, n)
	for step := 1; step <= 5; step++ {
		g := f64(f32s(randn(rng, n, 1))) // exactly representable in float32
		if err := b.Upload(G, f32s(g)); err != nil {
			t.Fatal(err)
		}
		err := b.AdamW(tensor.AdamWArgs{Params: P, Grads: G, ExpAvg: M, ExpAvgSq: V, Segments: segs,
			LR: lr, Beta1: b1, Beta2: b2, Eps: eps, WeightDecay: wd, Step: step})
		if err != nil {
			t.Fatal(err)
		}
		for i := range p {
			updated, decay := decays(i)
			if !updated {
				continue
			}
			if decay {
				p[i] *= 1 - lr*wd
			}
			m[i] = b1*m[i] + (1-b1)*g[i]
			v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
			mHat := m[i] / (1 - math.Pow(b1, float64(step)))
			vHat := v[i] / (1 - math.Pow(b2, float64(step)))
			p[i] -= lr * mHat / (math.Sqrt(vHat) + eps)
		}
		near(t, "params", get(t, b, P), p, 2e-6)
		near(t, "exp_avg", get(t, b, M), m, 1e-6)
		near(t, "exp_avg_sq", get(t, b, V), v, 1e-6)
	}
	got := get(t, b, P)
	for _, i := range []int{8, 9} {
		if got[i] != float32(p0[i]) {
			t.Errorf("frozen element %d changed from %v to %v", i, float32(p0[i]), got[i])
		}
	}
	if got, want := get(t, b, P)[5], p[5]; math.Abs(float64(got)-want) > 2e-6 {
		t.Errorf("non-decaying element 5 = %v, want %v", got, want)
	}
}

func TestAdamWNilSegmentsDecayEverything(t *testing.T) {
	b := New()
	P := put(t, b, tensor.F32, []float32{1, -2}, 2)
	G, M, V := mustAlloc(t, b, tensor.F32, 2), mustAlloc(t, b, tensor.F32, 2), mustAlloc(t, b, tensor.F32, 2)
	// Zero gradients: only the decay moves p, by the factor 1 − lr·wd.
	if err := b.AdamW(tensor.AdamWArgs{Params: P, Grads: G, ExpAvg: M, ExpAvgSq: V, LR: 0.5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Step: 1}); err != nil {
		t.Fatal(err)
	}
	near(t, "params", get(t, b, P), []float64{0.95, -1.9}, 1e-7)
}

func TestAdamWErrors(t *testing.T) {
	b := New()
	f := func(dt tensor.DType, n int) *tensor.Tensor { return mustAlloc(t, b, dt, n) }
	base := func() tensor.AdamWArgs {
		return tensor.AdamWArgs{Params: f(tensor.F32, 8), Grads: f(tensor.F32, 8), ExpAvg: f(tensor.F32, 8), ExpAvgSq: f(tensor.F32, 8),
			LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 1}
	}
	cases := []struct {
		name   string
		modify func(a *tensor.AdamWArgs)
		want   error
	}{
		{"BF16 params", func(a *tensor.AdamWArgs) { a.Params = f(tensor.BF16, 8) }, tensor.ErrDType},
		{"grads of another length", func(a *tensor.AdamWArgs) { a.Grads = f(tensor.F32, 7) }, tensor.ErrShape},
		{"a segment past the end", func(a *tensor.AdamWArgs) { a.Segments = []tensor.Segment{{Offset: 4, Len: 5}} }, tensor.ErrShape},
		{"overlapping segments", func(a *tensor.AdamWArgs) {
			a.Segments = []tensor.Segment{{Offset: 0, Len: 4}, {Offset: 3, Len: 2, Decay: true}}
		}, tensor.ErrShape},
		{"step 0 (steps count from 1)", func(a *tensor.AdamWArgs) { a.Step = 0 }, tensor.ErrArgument},
		{"beta1 = 1", func(a *tensor.AdamWArgs) { a.Beta1 = 1 }, tensor.ErrArgument},
		{"negative learning rate", func(a *tensor.AdamWArgs) { a.LR = -1 }, tensor.ErrArgument},
		{"negative weight decay", func(a *tensor.AdamWArgs) { a.WeightDecay = -0.1 }, tensor.ErrArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := base()
			c.modify(&a)
			if err := b.AdamW(a); !errorIs(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	if err := b.AdamW(base()); err != nil {
		t.Fatalf("the unmodified arguments must be valid: %v", err)
	}
}
