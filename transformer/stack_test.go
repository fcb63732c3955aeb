package transformer

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// TestLinearStack: a stack of three Linears, with biases or without, gives the outputs, input gradient and
// weight and bias gradients of its parts run one by one, both joined (weights adjacent, then biases: one
// GEMM each, the bias in the forward's epilogue, one BiasGrad) and not (a part's weight elsewhere: one GEMM
// per part into strided rows; or the weights adjacent and a bias elsewhere: one GEMM, the bias gradients
// through the Layout scratch), under FP32 and BF16 autocast; a mix of biased and bias-free parts gives no
// stack.
func TestLinearStack(t *testing.T) {
	b := cpu.New()
	const n, in = 5, 8
	outs := []int{6, 2, 2}
	rng := rand.New(rand.NewPCG(1, 2))
	upload := func(x *tensor.Tensor) {
		v := make([]float32, x.Numel())
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		if err := b.Upload(x, v); err != nil {
			t.Fatal(err)
		}
	}
	download := func(x *tensor.Tensor) []float32 {
		v := make([]float32, x.Numel())
		if err := b.Download(v, x); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		biased, joined, biasApart bool
	}{{false, true, false}, {false, false, false}, {true, true, false}, {true, false, false}, {true, false, true}} {
		joined, biased := c.joined, c.biased
		for _, pol := range []amp.Policy{amp.FP32, amp.BF16} {
			var parts []Projection
			var list, biases []NamedParameter
			gap := func() NamedParameter { // a parameter between two parts breaks adjacency
				g, _ := NewLinear(b, 1, 1, false)
				return NamedParameter{Name: "gap.weight", Param: g.Weight}
			}
			for i, o := range outs {
				l, err := NewLinear(b, in, o, biased)
				if err != nil {
					t.Fatal(err)
				}
				upload(l.Weight.Value)
				parts = append(parts, l)
				name := "p" + string(rune('0'+i))
				list = append(list, NamedParameter{Name: name + ".weight", Param: l.Weight})
				if biased {
					upload(l.Bias.Value)
					biases = append(biases, NamedParameter{Name: name + ".bias", Param: l.Bias})
					if c.biasApart && i == 0 {
						biases = append(biases, gap())
					}
				}
				if !joined && !c.biasApart && i == 0 {
					list = append(list, gap())
				}
			}
			list = append(list, biases...)
			g := ParamGroups{B: b}
			if err := g.Pack(list); err != nil {
				t.Fatal(err)
			}
			s := NewLinearStack(parts...)
			if s == nil || !s.Matches(parts...) || s.Out() != 10 {
				t.Fatalf("NewLinearStack = %v", s)
			}
			if got := s.weights() != nil && s.grads() != nil; got != (joined || c.biasApart) {
				t.Fatalf("%+v: weights joined = %v", c, got)
			}
			if s.Joined() != joined {
				t.Fatalf("%+v: Joined = %v", c, s.Joined())
			}
			arena := NewArena(b)
			if err := arena.Carve(func(a *Arena) error { s.Layout(a, n, pol.GemmDType()); return nil }); err != nil {
				t.Fatal(err)
			}
			if (s.dbias != nil) != c.biasApart {
				t.Fatalf("%+v: bias scratch %v", c, s.dbias)
			}
			dt := pol.GemmDType()
			p := &Pass{Backend: b, Policy: pol, Train: true}
			if dt != tensor.F32 {
				p.Cache = amp.NewWeightCache(b, dt)
			}
			x, _ := b.Alloc(dt, n, in)
			dy, _ := b.Alloc(dt, n, 10)
			upload(x)
			upload(dy)
			y, _ := b.Alloc(dt, n, 10)
			dx, _ := b.Alloc(tensor.F32, n, in)
			if err := s.Forward(p, y, x); err != nil {
				t.Fatal(err)
			}
			if err := s.Backward(p, dx, dy, x, false); err != nil {
				t.Fatal(err)
			}
			gotY, gotDX := download(y), download(dx)
			var gotG, gotB [][]float32
			for _, l := range s.Parts {
				gotG = append(gotG, download(l.Weight.Grad))
				if err := b.Fill(l.Weight.Grad, 0); err != nil {
					t.Fatal(err)
				}
				if biased {
					gotB = append(gotB, download(l.Bias.Grad))
					if err := b.Fill(l.Bias.Grad, 0); err != nil {
						t.Fatal(err)
					}
				}
			}
			// the parts one by one, into dense buffers
			dyh := download(dy)
			off := 0
			wantDX, _ := b.Alloc(tensor.F32, n, in)
			for i, l := range s.Parts {
				yi, _ := b.Alloc(dt, n, l.Out)
				dyi, _ := b.Alloc(dt, n, l.Out)
				col := make([]float32, n*l.Out)
				for r := range n {
					copy(col[r*l.Out:(r+1)*l.Out], dyh[r*10+off:r*10+off+l.Out])
				}
				if err := b.Upload(dyi, col); err != nil {
					t.Fatal(err)
				}
				if err := l.Forward(p, yi, x); err != nil {
					t.Fatal(err)
				}
				if err := l.Backward(p, wantDX, dyi, x, i > 0); err != nil {
					t.Fatal(err)
				}
				want := download(yi)
				for r := range n {
					for col := range l.Out {
						if g, w := gotY[r*10+off+col], want[r*l.Out+col]; g != w {
							t.Fatalf("%+v %v: out[%d, %d] = %v, want %v", c, pol, r, off+col, g, w)
						}
					}
				}
				closeTo(t, "weight grad", gotG[i], download(l.Weight.Grad))
				if biased {
					closeTo(t, "bias grad", gotB[i], download(l.Bias.Grad))
				}
				off += l.Out
			}
			closeTo(t, "input grad", gotDX, download(wantDX))
			if !joined || biased {
				continue
			}
			// The transposed forms: outT = outᵀ, and from dOutT = dOutᵀ the same gradients.
			for _, l := range s.Parts {
				if err := b.Fill(l.Weight.Grad, 0); err != nil {
					t.Fatal(err)
				}
			}
			yT, _ := b.Alloc(dt, 10, n)
			if err := s.ForwardT(p, yT, x); err != nil {
				t.Fatal(err)
			}
			gotT := download(yT)
			dyT := make([]float32, 10*n)
			for r := range n {
				for c := range 10 {
					if gotT[c*n+r] != gotY[r*10+c] {
						t.Fatalf("%v: ForwardT[%d, %d] = %v, Forward gave %v", pol, c, r, gotT[c*n+r], gotY[r*10+c])
					}
					dyT[c*n+r] = dyh[r*10+c]
				}
			}
			dyTt, _ := b.Alloc(dt, 10, n)
			if err := b.Upload(dyTt, dyT); err != nil {
				t.Fatal(err)
			}
			dxT, _ := b.Alloc(tensor.F32, n, in)
			if err := s.BackwardT(p, dxT, dyTt, x, false); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "BackwardT input grad", download(dxT), gotDX)
			for i, l := range s.Parts {
				closeTo(t, "BackwardT weight grad", download(l.Weight.Grad), gotG[i])
			}
			// A Linear reading its input transposed: out = (inT)ᵀ·Wᵀ, and its backward.
			down, _ := NewLinear(b, 10, 3, false)
			upload(down.Weight.Value)
			down.Weight.Grad, _ = b.Alloc(tensor.F32, 3, 10)
			out1, out2 := mustAlloc(t, b, dt, n, 3), mustAlloc(t, b, dt, n, 3)
			if err := down.Forward(p, out1, y); err != nil {
				t.Fatal(err)
			}
			if err := down.ForwardFromT(p, out2, yT); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "ForwardFromT", download(out2), download(out1))
			d3, _ := b.Alloc(dt, n, 3)
			upload(d3)
			dIn1, _ := b.Alloc(dt, n, 10)
			if err := down.Backward(p, dIn1, d3, y, false); err != nil {
				t.Fatal(err)
			}
			g1 := download(down.Weight.Grad)
			if err := b.Fill(down.Weight.Grad, 0); err != nil {
				t.Fatal(err)
			}
			dInT, _ := b.Alloc(dt, 10, n)
			if err := down.BackwardToT(p, dInT, d3, yT); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "BackwardToT weight grad", download(down.Weight.Grad), g1)
			a, at := download(dIn1), download(dInT)
			for r := range n {
				for c := range 10 {
					if d := math.Abs(float64(a[r*10+c] - at[c*n+r])); d > 1e-2*(1+math.Abs(float64(a[r*10+c]))) {
						t.Fatalf("%v: BackwardToT[%d, %d] = %v, Backward gave %v", pol, c, r, at[c*n+r], a[r*10+c])
					}
				}
			}
		}
	}
	biased, _ := NewLinear(b, 4, 4, true)
	plain, _ := NewLinear(b, 4, 4, false)
	if NewLinearStack(plain, biased) != nil || NewLinearStack() != nil {
		t.Error("a stack mixing biased and bias-free parts, or of no parts")
	}
}

func mustAlloc(t *testing.T, b tensor.Backend, dt tensor.DType, shape ...int) *tensor.Tensor {
	t.Helper()
	x, err := b.Alloc(dt, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// closeTo fails unless got equals want within FP32 summation-order rounding.
func closeTo(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}
