package cpu

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// The decoder ops (RMSNorm, RoPE, SwiGLU, GELUTanh): FP64 gradient checks of the generic kernels, and values
// and argument errors of the backend methods.

func ident[T scalar](v T) T { return v }

func TestRMSNormGradients(t *testing.T) {
	rng := newRNG(t)
	for _, n := range []int{1, 3, 7} {
		for _, c := range oddSizes {
			x, w, g := randn(rng, n*c, 2), randn(rng, c, 1), randn(rng, n*c, 1)
			out, rstd := make([]float64, n*c), make([]float64, n)
			const eps = 1e-6
			loss := func() float64 { rmsNormKernel(out, rstd, x, w, eps, ident[float64]); return dot(g, out) }
			loss()
			dx, dw := make([]float64, n*c), make([]float64, c)
			rmsNormBackwardKernel(dx, dw, g, x, w, rstd, ident[float64])
			checkGrad(t, rng, loss, gradInput{"x", x, dx}, gradInput{"weight", w, dw})
		}
	}
}

func TestRMSNormValues(t *testing.T) {
	b := New()
	// One row [1, 2, 3, 4]: mean(x²) = 7.5; weight 2.
	x := put(t, b, tensor.F32, []float32{1, 2, 3, 4}, 1, 4)
	w := put(t, b, tensor.BF16, []float32{2, 2, 2, 2}, 4)
	out, rstd := mustAlloc(t, b, tensor.F32, 1, 4), mustAlloc(t, b, tensor.F32, 1)
	const eps = 1e-6
	if err := b.RMSNorm(out, rstd, x, w, eps); err != nil {
		t.Fatal(err)
	}
	r := 1 / math.Sqrt(7.5+eps)
	near(t, "out", get(t, b, out), []float64{2 * r, 4 * r, 6 * r, 8 * r}, 1e-6)
	near(t, "rstd", get(t, b, rstd), []float64{r}, 1e-7)
}

// TestRMSNormRoundsBeforeWeight pins LlamaRMSNorm's cast: for a BF16 x the normalised value is rounded to BF16
// before the (F32) weight multiply, so out = w·bf16(x·rstd) exactly, not bf16-free w·x·rstd.
func TestRMSNormRoundsBeforeWeight(t *testing.T) {
	b := New()
	xs := []float32{0.3, -1.7, 2.9, 0.05, 1.1}
	w := []float32{1.37, -0.61, 0.999, 2.5, 1.0001}
	x := put(t, b, tensor.BF16, xs, 1, 5)
	xr := get(t, b, x)
	out, rstd := mustAlloc(t, b, tensor.F32, 1, 5), mustAlloc(t, b, tensor.F32, 1)
	if err := b.RMSNorm(out, rstd, x, put(t, b, tensor.F32, w, 5), 1e-5); err != nil {
		t.Fatal(err)
	}
	var ss float32
	for _, v := range xr {
		ss += v * v
	}
	r := float32(1 / math.Sqrt(float64(ss/5+1e-5)))
	got := get(t, b, out)
	differs := false
	for j, v := range xr {
		want := w[j] * tensor.RoundTo(tensor.BF16, v*r)
		if got[j] != want {
			t.Errorf("out[%d] = %v, want w·bf16(x·rstd) = %v", j, got[j], want)
		}
		differs = differs || want != w[j]*(v*r)
	}
	if !differs {
		t.Fatal("the inputs do not distinguish the rounded form; pick others")
	}
}

// TestRMSNormBackwardChunked runs enough rows for the weight gradient to be split into chunks, accumulates
// into a non-zero dweight, and compares with the float64 kernel run serially.
func TestRMSNormBackwardChunked(t *testing.T) {
	rng := newRNG(t)
	b := New()
	const n, c = 517, 65
	x, w, dout, acc := randn(rng, n*c, 1), randn(rng, c, 1), randn(rng, n*c, 1), randn(rng, c, 1)
	out, rstd := make([]float64, n*c), make([]float64, n)
	rmsNormKernel(out, rstd, x, w, 1e-5, ident[float64])
	dx, dw := make([]float64, n*c), append([]float64(nil), acc...)
	rmsNormBackwardKernel(dx, dw, dout, x, w, rstd, ident[float64])

	X, W := put(t, b, tensor.F32, f32s(x), n, c), put(t, b, tensor.F32, f32s(w), c)
	O, R := mustAlloc(t, b, tensor.F32, n, c), mustAlloc(t, b, tensor.F32, n)
	if err := b.RMSNorm(O, R, X, W, 1e-5); err != nil {
		t.Fatal(err)
	}
	near(t, "out", get(t, b, O), out, 1e-5)
	DX, DW := mustAlloc(t, b, tensor.F32, n, c), put(t, b, tensor.F32, f32s(acc), c)
	if err := b.RMSNormBackward(DX, DW, put(t, b, tensor.F32, f32s(dout), n, c), X, W, R); err != nil {
		t.Fatal(err)
	}
	near(t, "dx", get(t, b, DX), dx, 1e-4)
	near(t, "dweight", get(t, b, DW), dw, 1e-4)
	// A frozen weight: dx only.
	if err := b.RMSNormBackward(DX, nil, put(t, b, tensor.F32, f32s(dout), n, c), X, W, R); err != nil {
		t.Fatal(err)
	}
	near(t, "dx (frozen)", get(t, b, DX), dx, 1e-4)
}

func TestRoPEGradients(t *testing.T) {
	rng := newRNG(t)
	for _, half := range []int{1, 3, 16} {
		theta := randn(rng, half, 3)
		c, s := make([]float64, half), make([]float64, half)
		for i, a := range theta {
			c[i], s[i] = math.Cos(a), math.Sin(a)
		}
		x, g := randn(rng, 2*half, 1), randn(rng, 2*half, 1)
		y := make([]float64, 2*half)
		loss := func() float64 {
			copy(y, x)
			ropeKernel(y[:half], y[half:], c, s, false)
			return dot(g, y)
		}
		dx := append([]float64(nil), g...)
		ropeKernel(dx[:half], dx[half:], c, s, true) // dL/dx = Rᵀ·g
		checkGrad(t, rng, loss, gradInput{"x", x, dx})
		// The inverse undoes the rotation.
		copy(y, x)
		ropeKernel(y[:half], y[half:], c, s, false)
		ropeKernel(y[:half], y[half:], c, s, true)
		for i := range y {
			if math.Abs(y[i]-x[i]) > 1e-12 {
				t.Fatalf("half %d: inverse(forward(x))[%d] = %v, want %v", half, i, y[i], x[i])
			}
		}
	}
}

// ropeTables returns (p, half) cos/sin tables of the default rope (θ = 10000) for head size 2·half.
func ropeTables(p, half int) (cos, sin []float32) {
	cos, sin = make([]float32, p*half), make([]float32, p*half)
	for pos := 0; pos < p; pos++ {
		for i := 0; i < half; i++ {
			a := float64(pos) * math.Pow(10000, -float64(2*i)/float64(2*half))
			cos[pos*half+i], sin[pos*half+i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	return cos, sin
}

// TestRoPEInFusedQKV rotates the q and k parts of a fused (B, T, 3, H, D) projection output in place through
// strides and compares with a rotation of dense copies; v and everything outside the operands is untouched.
func TestRoPEInFusedQKV(t *testing.T) {
	rng := newRNG(t)
	b := New()
	const bsz, tt, h, d, p = 2, 5, 3, 6, 9
	half := d / 2
	cosv, sinv := ropeTables(p, half)
	pos := []int32{0, 1, 2, 3, 4, 8, 2, 2, 0, 7}
	qkv := f32s(randn(rng, bsz*tt*3*h*d, 1))
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		X := put(t, b, dt, qkv, bsz*tt*3*h*d)
		orig := get(t, b, X)
		P := mustAlloc(t, b, tensor.I32, bsz, tt)
		if err := b.Upload(P, pos); err != nil {
			t.Fatal(err)
		}
		C, S := put(t, b, tensor.F32, cosv, p, half), put(t, b, tensor.F32, sinv, p, half)
		for part := 0; part < 2; part++ { // q, then k
			view, _ := X.View(part*h*d, X.Numel()-part*h*d)
			op := tensor.AttnOperand{T: view, StrideB: tt * 3 * h * d, StrideH: d, StrideT: 3 * h * d}
			if err := b.RoPE(op, bsz, h, tt, d, P, C, S, false); err != nil {
				t.Fatal(err)
			}
		}
		got := get(t, b, X)
		for bi := 0; bi < bsz; bi++ {
			for ti := 0; ti < tt; ti++ {
				pp := int(pos[bi*tt+ti])
				for part := 0; part < 3; part++ {
					for hi := 0; hi < h; hi++ {
						at := ((bi*tt+ti)*3+part)*h*d + hi*d
						for i := 0; i < half; i++ {
							x1, x2 := orig[at+i], orig[at+half+i]
							w1, w2 := x1, x2
							if part < 2 {
								c, s := cosv[pp*half+i], sinv[pp*half+i]
								w1 = tensor.RoundTo(dt, x1*c-x2*s)
								w2 = tensor.RoundTo(dt, x2*c+x1*s)
							}
							if got[at+i] != w1 || got[at+half+i] != w2 {
								t.Fatalf("%v b=%d t=%d part=%d h=%d i=%d: got (%v, %v), want (%v, %v)", dt, bi, ti, part, hi, i,
									got[at+i], got[at+half+i], w1, w2)
							}
						}
					}
				}
			}
		}
	}
}

func TestRoPEErrors(t *testing.T) {
	b := New()
	x := mustAlloc(t, b, tensor.F32, 2, 3, 4, 8)
	pos := mustAlloc(t, b, tensor.I32, 2, 4)
	cos, sin := mustAlloc(t, b, tensor.F32, 4, 4), mustAlloc(t, b, tensor.F32, 4, 4)
	bad := mustAlloc(t, b, tensor.I32, 2, 4)
	if err := b.Upload(bad, []int32{0, 1, 2, 3, 0, 1, 4, 3}); err != nil {
		t.Fatal(err)
	}
	dense := tensor.AttnOperand{T: x}
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"dense operand", b.RoPE(dense, 2, 3, 4, 8, pos, cos, sin, false), nil},
		{"odd D", b.RoPE(dense, 2, 3, 8, 3, pos, cos, sin, false), tensor.ErrArgument},
		{"positions not B·T", b.RoPE(dense, 1, 3, 4, 8, pos, cos, sin, false), tensor.ErrShape},
		{"table not D/2 wide", b.RoPE(dense, 2, 3, 4, 8, pos, mustAlloc(t, b, tensor.F32, 4, 3), mustAlloc(t, b, tensor.F32, 4, 3), false), tensor.ErrShape},
		{"I64 positions", b.RoPE(dense, 2, 3, 4, 8, mustAlloc(t, b, tensor.I64, 2, 4), cos, sin, false), tensor.ErrDType},
		{"position outside the table", b.RoPE(dense, 2, 3, 4, 8, bad, cos, sin, false), tensor.ErrArgument},
		{"overlapping strides", b.RoPE(tensor.AttnOperand{T: x, StrideB: 96, StrideH: 4, StrideT: 8}, 2, 3, 4, 8, pos, cos, sin, false), tensor.ErrArgument},
		{"operand past the tensor", b.RoPE(tensor.AttnOperand{T: x, StrideB: 97, StrideH: 32, StrideT: 8}, 2, 3, 4, 8, pos, cos, sin, false), tensor.ErrShape},
		{"nil operand", b.RoPE(tensor.AttnOperand{}, 2, 3, 4, 8, pos, cos, sin, false), tensor.ErrArgument},
	} {
		if c.want == nil {
			if c.err != nil {
				t.Errorf("%s: %v", c.name, c.err)
			}
			continue
		}
		if !errorIs(c.err, c.want) {
			t.Errorf("%s: err = %v, want a *tensor.OpError wrapping %v", c.name, c.err, c.want)
		}
	}
}

func TestSwiGLUGradients(t *testing.T) {
	rng := newRNG(t)
	for _, n := range oddSizes {
		gate, up, g := randn(rng, n, 3), randn(rng, n, 1), randn(rng, n, 1)
		out := make([]float64, n)
		loss := func() float64 { swigluKernel(out, gate, up, ident[float64]); return dot(g, out) }
		dgate, dup := make([]float64, n), make([]float64, n)
		swigluBackwardKernel(dgate, dup, g, gate, up, ident[float64])
		checkGrad(t, rng, loss, gradInput{"gate", gate, dgate}, gradInput{"up", up, dup})
	}
}

func TestGELUTanhGradients(t *testing.T) {
	rng := newRNG(t)
	x, g := randn(rng, 65, 3), randn(rng, 65, 1)
	y := make([]float64, 65)
	loss := func() float64 { geluTanhKernel(y, x); return dot(g, y) }
	dx := make([]float64, 65)
	geluTanhBackwardKernel(dx, g, x)
	checkGrad(t, rng, loss, gradInput{"x", x, dx})
}

func TestSwiGLUAndGELUTanhValues(t *testing.T) {
	b := New()
	gate := put(t, b, tensor.F32, []float32{0, 1, -2}, 3)
	up := put(t, b, tensor.F32, []float32{5, 2, 3}, 3)
	out := mustAlloc(t, b, tensor.F32, 3)
	if err := b.SwiGLU(out, gate, up); err != nil {
		t.Fatal(err)
	}
	silu := func(x float64) float64 { return x / (1 + math.Exp(-x)) }
	near(t, "SwiGLU", get(t, b, out), []float64{0, 2 * silu(1), 3 * silu(-2)}, 1e-7)
	// gelu_new(1) = 0.5·(1 + tanh(√(2/π)·1.044715)); gelu_new(−3) is small and negative.
	x := put(t, b, tensor.F32, []float32{1, -3, 0}, 3)
	if err := b.GELUTanh(out, x); err != nil {
		t.Fatal(err)
	}
	near(t, "GELUTanh", get(t, b, out), []float64{0.8411919906082768, -0.0036373920817729943, 0}, 1e-7)
	if err := b.SwiGLU(out, gate, put(t, b, tensor.BF16, []float32{1, 2, 3}, 3)); !errorIs(err, tensor.ErrDType) {
		t.Errorf("SwiGLU with gate F32 and up BF16: err = %v, want ErrDType", err)
	}
	if err := b.SwiGLU(nil, gate, up); !errorIs(err, tensor.ErrArgument) {
		t.Errorf("SwiGLU with a nil out: err = %v, want ErrArgument", err)
	}
}
