package cpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// attnCase is one shape and masking of fused attention for the checks below.
type attnCase struct {
	name                  string
	B, Hq, Hkv, Tq, Tk, D int
	mask                  bool // padding mask: batch member 1 pads its last keys with −Inf, member 0 uses −1e4
	fullyMasked           bool // with mask: the last batch member masks every key (−Inf): O = 0, LSE = −Inf
	causal                bool
	segments              bool
	p                     float32
}

var attnCases = []attnCase{
	{name: "MHA", B: 2, Hq: 3, Hkv: 3, Tq: 7, Tk: 7, D: 5},
	{name: "padding mask", B: 3, Hq: 2, Hkv: 2, Tq: 7, Tk: 7, D: 3, mask: true, fullyMasked: true},
	{name: "causal", B: 2, Hq: 2, Hkv: 2, Tq: 7, Tk: 7, D: 3, causal: true},
	{name: "causal Tq<Tk", B: 2, Hq: 2, Hkv: 2, Tq: 3, Tk: 7, D: 3, causal: true},
	{name: "causal Tq>Tk", B: 1, Hq: 2, Hkv: 2, Tq: 7, Tk: 3, D: 3, causal: true},
	{name: "segments", B: 2, Hq: 2, Hkv: 2, Tq: 7, Tk: 7, D: 3, segments: true},
	{name: "GQA", B: 2, Hq: 6, Hkv: 2, Tq: 3, Tk: 7, D: 3},
	{name: "dropout", B: 2, Hq: 2, Hkv: 2, Tq: 7, Tk: 7, D: 3, p: 0.3},
	{name: "everything", B: 3, Hq: 4, Hkv: 2, Tq: 7, Tk: 7, D: 3, mask: true, fullyMasked: true, causal: true, segments: true, p: 0.2},
}

// inputs draws the case's mask and segment ids.
func (c attnCase) inputs(rng *rand.Rand) (mask []float32, seg []int32) {
	if c.mask {
		mask = make([]float32, c.B*c.Tk)
		for j := c.Tk - 2; j < c.Tk; j++ {
			mask[j] = -1e4
			if c.B > 1 {
				mask[c.Tk+j] = float32(math.Inf(-1))
			}
		}
		if c.fullyMasked {
			for j := 0; j < c.Tk; j++ {
				mask[(c.B-1)*c.Tk+j] = float32(math.Inf(-1))
			}
		}
	}
	if c.segments {
		seg = make([]int32, c.B*c.Tq)
		for b := 0; b < c.B; b++ {
			id := int32(0)
			for i := 0; i < c.Tq; i++ {
				if i > 0 && rng.IntN(3) == 0 {
					id++
				}
				seg[b*c.Tq+i] = id
			}
		}
	}
	return mask, seg
}

func (c attnCase) problem64(mask []float32, seg []int32) *attnProblem[float64] {
	return &attnProblem[float64]{B: c.B, Hq: c.Hq, Hkv: c.Hkv, Tq: c.Tq, Tk: c.Tk, D: c.D,
		scale: 1 / math.Sqrt(float64(c.D)), mask: mask, seg: seg, causal: c.causal, p: c.p, seed: 7, offset: 3}
}

// TestAttentionGradients checks the FP64 instantiation of the backward kernel (dQ, dK, dV) against central
// differences of L = Σ g·O through the forward kernel, on odd shapes with padding (and a fully masked row),
// causal masks with Tq = Tk and Tq ≠ Tk, segments, grouped-query heads and dropout.
func TestAttentionGradients(t *testing.T) {
	for _, c := range attnCases {
		t.Run(c.name, func(t *testing.T) {
			rng := newRNG(t)
			mask, seg := c.inputs(rng)
			pr := c.problem64(mask, seg)
			nq, nk := c.B*c.Hq*c.Tq*c.D, c.B*c.Hkv*c.Tk*c.D
			q, k, v := randn(rng, nq, 1), randn(rng, nk, 1), randn(rng, nk, 1)
			g := randn(rng, nq, 1)
			o, lse := make([]float64, nq), make([]float64, c.B*c.Hq*c.Tq)
			loss := func() float64 { attnForwardKernel(pr, o, lse, q, k, v); return dot(g, o) }
			loss()
			dq, dk, dv := make([]float64, nq), make([]float64, nk), make([]float64, nk)
			attnBackwardKernel(pr, dq, dk, dv, q, k, v, o, lse, g)
			checkGrad(t, rng, loss, gradInput{"Q", q, dq}, gradInput{"K", k, dk}, gradInput{"V", v, dv})
			if c.fullyMasked {
				last := (c.B - 1) * c.Hq * c.Tq
				for r := last; r < c.B*c.Hq*c.Tq; r++ {
					if !math.IsInf(lse[r], -1) {
						t.Fatalf("LSE of fully masked row %d = %v, want -Inf", r, lse[r])
					}
					for d := 0; d < c.D; d++ {
						if o[r*c.D+d] != 0 || dq[r*c.D+d] != 0 {
							t.Fatalf("fully masked row %d: O = %v, dQ = %v, want 0", r, o[r*c.D+d], dq[r*c.D+d])
						}
					}
				}
			}
		})
	}
}

// twoPass runs attention as the layer's two-pass path does, through the backend's own ops on dense F32 (or dt)
// tensors: S = scale·Q·Kᵀ (Gemm, per head), P = Softmax(S + mask) with the causal/segment/padding mask as one
// additive row per query, P' = Dropout(P), O = P'·V; and the backward dP' = dO·Vᵀ, dP = DropoutBackward(dP'),
// dS = SoftmaxBackward(dP, P), dQ = scale·dS·K, dK = scale·dSᵀ·Q, dV = P'ᵀ·dO (summed over a group's heads).
// It returns O, P', dQ, dK, dV.
func twoPass(t *testing.T, b *Backend, c attnCase, dt tensor.DType, mask []float32, seg []int32, q, k, v, dout []float32) (o, pd, dq, dk, dv []float32) {
	t.Helper()
	pr := c.problem64(mask, seg)
	rows := c.B * c.Hq * c.Tq
	full := make([]float32, rows*c.Tk)
	for r := 0; r < rows; r++ {
		bb, i := r/(c.Hq*c.Tq), r%c.Tq
		for j := 0; j < c.Tk; j++ {
			switch {
			case !pr.allowed(bb, i, j):
				full[r*c.Tk+j] = float32(math.Inf(-1))
			case mask != nil:
				full[r*c.Tk+j] = mask[bb*c.Tk+j]
			}
		}
	}
	scale := float32(1 / math.Sqrt(float64(c.D)))
	Q, K, V, DO := put(t, b, dt, q, len(q)), put(t, b, dt, k, len(k)), put(t, b, dt, v, len(v)), put(t, b, dt, dout, len(dout))
	S, P, Pd := mustAlloc(t, b, tensor.F32, rows, c.Tk), mustAlloc(t, b, dt, rows, c.Tk), mustAlloc(t, b, dt, rows, c.Tk)
	O, DQ := mustAlloc(t, b, dt, len(q)), mustAlloc(t, b, dt, len(q))
	DK, DV := mustAlloc(t, b, dt, len(k)), mustAlloc(t, b, dt, len(k))
	dP, dS := mustAlloc(t, b, tensor.F32, rows, c.Tk), mustAlloc(t, b, dt, rows, c.Tk)
	Mask := put(t, b, tensor.F32, full, rows, c.Tk)
	gemm := func(a tensor.GemmArgs) {
		t.Helper()
		if err := b.Gemm(a); err != nil {
			t.Fatal(err)
		}
	}
	G := c.Hq / c.Hkv
	for bh := 0; bh < c.B*c.Hq; bh++ {
		kv := (bh/c.Hq*c.Hkv + bh%c.Hq/G) * c.Tk * c.D
		qo, so := bh*c.Tq*c.D, bh*c.Tq*c.Tk
		qv, _ := Q.View(qo, c.Tq, c.D)
		kv2, _ := K.View(kv, c.Tk, c.D)
		sv, _ := S.View(so, c.Tq, c.Tk)
		gemm(tensor.GemmArgs{M: c.Tq, N: c.Tk, K: c.D, A: qv, B: kv2, TransB: true, C: sv, Alpha: scale})
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.Softmax(P, S, Mask))
	must(b.Dropout(Pd, P, c.p, 7, 3))
	for bh := 0; bh < c.B*c.Hq; bh++ {
		kv := (bh/c.Hq*c.Hkv + bh%c.Hq/G) * c.Tk * c.D
		qo, so := bh*c.Tq*c.D, bh*c.Tq*c.Tk
		first := bh%G == 0
		beta := float32(1)
		if first {
			beta = 0
		}
		pv, _ := Pd.View(so, c.Tq, c.Tk)
		vv, _ := V.View(kv, c.Tk, c.D)
		ov, _ := O.View(qo, c.Tq, c.D)
		dov, _ := DO.View(qo, c.Tq, c.D)
		dpv, _ := dP.View(so, c.Tq, c.Tk)
		dvv, _ := DV.View(kv, c.Tk, c.D)
		gemm(tensor.GemmArgs{M: c.Tq, N: c.D, K: c.Tk, A: pv, B: vv, C: ov, Alpha: 1})
		gemm(tensor.GemmArgs{M: c.Tq, N: c.Tk, K: c.D, A: dov, B: vv, TransB: true, C: dpv, Alpha: 1})
		gemm(tensor.GemmArgs{M: c.Tk, N: c.D, K: c.Tq, A: pv, TransA: true, B: dov, C: dvv, Alpha: 1, Beta: beta})
	}
	must(b.DropoutBackward(dP, dP, c.p, 7, 3))
	must(b.SoftmaxBackward(dS, dP, P))
	for bh := 0; bh < c.B*c.Hq; bh++ {
		kv := (bh/c.Hq*c.Hkv + bh%c.Hq/G) * c.Tk * c.D
		qo, so := bh*c.Tq*c.D, bh*c.Tq*c.Tk
		beta := float32(1)
		if bh%G == 0 {
			beta = 0
		}
		dsv, _ := dS.View(so, c.Tq, c.Tk)
		kv2, _ := K.View(kv, c.Tk, c.D)
		qv, _ := Q.View(qo, c.Tq, c.D)
		dqv, _ := DQ.View(qo, c.Tq, c.D)
		dkv, _ := DK.View(kv, c.Tk, c.D)
		gemm(tensor.GemmArgs{M: c.Tq, N: c.D, K: c.Tk, A: dsv, B: kv2, C: dqv, Alpha: scale})
		gemm(tensor.GemmArgs{M: c.Tk, N: c.D, K: c.Tq, A: dsv, TransA: true, B: qv, C: dkv, Alpha: scale, Beta: beta})
	}
	return get(t, b, O), get(t, b, Pd), get(t, b, DQ), get(t, b, DK), get(t, b, DV)
}

// fused runs Backend.Attention and AttentionBackward on dense operands of dtype dt and returns O, LSE, dQ, dK,
// dV.
func fused(t *testing.T, b *Backend, c attnCase, dt tensor.DType, mask []float32, seg []int32, q, k, v, dout []float32) (o, lse, dq, dk, dv []float32) {
	t.Helper()
	op := func(x *tensor.Tensor) tensor.AttnOperand { return tensor.AttnOperand{T: x} }
	a := tensor.AttentionArgs{B: c.B, Hq: c.Hq, Hkv: c.Hkv, Tq: c.Tq, Tk: c.Tk, D: c.D,
		Q: op(put(t, b, dt, q, len(q))), K: op(put(t, b, dt, k, len(k))), V: op(put(t, b, dt, v, len(v))),
		O: op(mustAlloc(t, b, dt, len(q))), LSE: mustAlloc(t, b, tensor.F32, c.B*c.Hq*c.Tq),
		Scale: float32(1 / math.Sqrt(float64(c.D))), Causal: c.causal, DropoutP: c.p, Seed: 7, Offset: 3}
	if mask != nil {
		a.Mask = put(t, b, tensor.F32, mask, c.B, c.Tk)
	}
	if seg != nil {
		a.Segments = mustAlloc(t, b, tensor.I32, c.B, c.Tq)
		if err := b.Upload(a.Segments, seg); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Attention(a); err != nil {
		t.Fatal(err)
	}
	ba := tensor.AttentionBackwardArgs{AttentionArgs: a, DO: op(put(t, b, dt, dout, len(dout))),
		DQ: op(mustAlloc(t, b, dt, len(q))), DK: op(mustAlloc(t, b, dt, len(k))), DV: op(mustAlloc(t, b, dt, len(k)))}
	if err := b.AttentionBackward(ba); err != nil {
		t.Fatal(err)
	}
	return get(t, b, a.O.T), get(t, b, a.LSE), get(t, b, ba.DQ.T), get(t, b, ba.DK.T), get(t, b, ba.DV.T)
}

// TestAttentionEqualsTwoPass requires the fused op to match the two-pass path (Gemm → Softmax → Dropout →
// Gemm, and its backward) on every case, in F32 to FP32 rounding and in BF16/F16 to the half dtype's
// rounding of P', dS and the outputs.
func TestAttentionEqualsTwoPass(t *testing.T) {
	b := New()
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		tol := map[tensor.DType]float64{tensor.F32: 2e-6, tensor.BF16: 3e-2, tensor.F16: 4e-3}[dt]
		for _, c := range attnCases {
			t.Run(dt.String()+" "+c.name, func(t *testing.T) {
				rng := newRNG(t)
				mask, seg := c.inputs(rng)
				nq, nk := c.B*c.Hq*c.Tq*c.D, c.B*c.Hkv*c.Tk*c.D
				q, k, v, dout := f32s(randn(rng, nq, 1)), f32s(randn(rng, nk, 1)), f32s(randn(rng, nk, 1)), f32s(randn(rng, nq, 1))
				o, _, dq, dk, dv := fused(t, b, c, dt, mask, seg, q, k, v, dout)
				wo, _, wdq, wdk, wdv := twoPass(t, b, c, dt, mask, seg, q, k, v, dout)
				for _, r := range []struct {
					name      string
					got, want []float32
				}{{"O", o, wo}, {"dQ", dq, wdq}, {"dK", dk, wdk}, {"dV", dv, wdv}} {
					near(t, r.name, r.got, f64(r.want), tol)
				}
			})
		}
	}
}

// TestAttentionDropoutMaskIsDropouts requires the fused op to drop exactly the elements the Dropout op drops
// in the two-pass path, forward and backward: with Tk = D and V = I, O = P' itself, and with Tq = D and
// dO = I, dV = P'ᵀ; every zero of the fused results must be a dropped element and every dropped element a
// zero (the scores are moderate, so no kept probability underflows).
func TestAttentionDropoutMaskIsDropouts(t *testing.T) {
	b := New()
	for _, p := range []float32{0.1, 0.5} {
		c := attnCase{name: "mask", B: 2, Hq: 3, Hkv: 3, Tq: 9, Tk: 9, D: 9, p: p}
		t.Run(fmt.Sprint("p=", p), func(t *testing.T) {
			rng := newRNG(t)
			n := c.B * c.Hq * c.Tq * c.D
			eye := make([]float32, n)
			for r := 0; r < c.B*c.Hq*c.Tq; r++ {
				eye[r*c.D+r%c.Tq] = 1
			}
			q, k := f32s(randn(rng, n, 0.5)), f32s(randn(rng, n, 0.5))
			o, _, _, _, dv := fused(t, b, c, tensor.F32, nil, nil, q, k, eye, eye)
			_, pd, _, _, _ := twoPass(t, b, c, tensor.F32, nil, nil, q, k, eye, eye)
			dropped := 0
			for r := 0; r < c.B*c.Hq; r++ {
				for i := 0; i < c.Tq; i++ {
					for j := 0; j < c.Tk; j++ {
						want := pd[(r*c.Tq+i)*c.Tk+j] == 0
						if want {
							dropped++
						}
						if got := o[(r*c.Tq+i)*c.D+j] == 0; got != want {
							t.Fatalf("head %d: O[%d, %d] = %v but the Dropout op's P'[%d, %d] = %v", r, i, j, o[(r*c.Tq+i)*c.D+j], i, j, pd[(r*c.Tq+i)*c.Tk+j])
						}
						if got := dv[(r*c.Tk+j)*c.D+i] == 0; got != want {
							t.Fatalf("head %d: dV[%d, %d] = %v but the Dropout op's P'[%d, %d] = %v", r, j, i, dv[(r*c.Tk+j)*c.D+i], i, j, pd[(r*c.Tq+i)*c.Tk+j])
						}
					}
				}
			}
			if total := c.B * c.Hq * c.Tq * c.Tk; dropped == 0 || dropped == total {
				t.Fatalf("%d of %d elements dropped at p = %v", dropped, total, p)
			}
		})
	}
}

// TestAttentionDeterministic requires bit-identical results from run to run (the GQA backward sums its query
// heads in a fixed order).
func TestAttentionDeterministic(t *testing.T) {
	b := New()
	c := attnCases[len(attnCases)-1]
	rng := newRNG(t)
	mask, seg := c.inputs(rng)
	nq, nk := c.B*c.Hq*c.Tq*c.D, c.B*c.Hkv*c.Tk*c.D
	q, k, v, dout := f32s(randn(rng, nq, 1)), f32s(randn(rng, nk, 1)), f32s(randn(rng, nk, 1)), f32s(randn(rng, nq, 1))
	first := [][]float32{}
	for run := 0; run < 2; run++ {
		o, lse, dq, dk, dv := fused(t, b, c, tensor.BF16, mask, seg, q, k, v, dout)
		for i, x := range [][]float32{o, lse, dq, dk, dv} {
			if run == 0 {
				first = append(first, x)
				continue
			}
			for j := range x {
				if math.Float32bits(x[j]) != math.Float32bits(first[i][j]) {
					t.Fatalf("output %d element %d: %v then %v", i, j, first[i][j], x[j])
				}
			}
		}
	}
}

// TestAttentionErrors checks the argument errors shared with every backend (opcheck.AttentionGeometry).
func TestAttentionErrors(t *testing.T) {
	b := New()
	mk := func(dt tensor.DType, n int) tensor.AttnOperand { return tensor.AttnOperand{T: mustAlloc(t, b, dt, n)} }
	good := func() tensor.AttentionArgs {
		return tensor.AttentionArgs{B: 1, Hq: 2, Hkv: 1, Tq: 3, Tk: 3, D: 4, Q: mk(tensor.BF16, 24), K: mk(tensor.BF16, 12),
			V: mk(tensor.BF16, 12), O: mk(tensor.BF16, 24), LSE: mustAlloc(t, b, tensor.F32, 6), Scale: 0.5}
	}
	if err := b.Attention(good()); err != nil {
		t.Fatalf("valid arguments: %v", err)
	}
	{
		a := good()
		a.KeepBits = mustAlloc(t, b, tensor.I32, tensor.AttentionKeepBitsLen(1, 2, 3, 3)) // 12 elements
		if err := b.Attention(a); err != nil {
			t.Fatalf("valid arguments with KeepBits: %v", err)
		}
	}
	cases := []struct {
		name string
		edit func(a *tensor.AttentionArgs)
		want error
	}{
		{"Hq not a multiple of Hkv", func(a *tensor.AttentionArgs) { a.Hkv = 3 }, tensor.ErrArgument},
		{"K of another dtype", func(a *tensor.AttentionArgs) { a.K = mk(tensor.F16, 12) }, tensor.ErrDType},
		{"K too small", func(a *tensor.AttentionArgs) { a.K = mk(tensor.BF16, 11) }, tensor.ErrShape},
		{"LSE of BF16", func(a *tensor.AttentionArgs) { a.LSE = mustAlloc(t, b, tensor.BF16, 6) }, tensor.ErrDType},
		{"mask of the wrong length", func(a *tensor.AttentionArgs) { a.Mask = mustAlloc(t, b, tensor.F32, 4) }, tensor.ErrShape},
		{"segments with Tq != Tk", func(a *tensor.AttentionArgs) {
			a.Tk, a.K, a.V = 2, mk(tensor.BF16, 8), mk(tensor.BF16, 8)
			a.Segments = mustAlloc(t, b, tensor.I32, 3)
		}, tensor.ErrShape},
		{"overlapping O", func(a *tensor.AttentionArgs) { a.O.StrideB, a.O.StrideH, a.O.StrideT = 24, 0, 4 }, tensor.ErrArgument},
		{"dropout p = 1", func(a *tensor.AttentionArgs) { a.DropoutP = 1 }, tensor.ErrArgument},
		{"KeepBits of the wrong length", func(a *tensor.AttentionArgs) { a.KeepBits = mustAlloc(t, b, tensor.I32, 11) }, tensor.ErrShape},
		{"KeepBits of F32", func(a *tensor.AttentionArgs) { a.KeepBits = mustAlloc(t, b, tensor.F32, 12) }, tensor.ErrDType},
		{"nil Q", func(a *tensor.AttentionArgs) { a.Q.T = nil }, tensor.ErrArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := good()
			c.edit(&a)
			err := b.Attention(a)
			var oe *tensor.OpError
			if !errors.Is(err, c.want) || !errors.As(err, &oe) || oe.Op != "Attention" {
				t.Fatalf("err = %v, want an Attention *tensor.OpError wrapping %v", err, c.want)
			}
		})
	}
}

// TestAttentionStridedOperands requires operands read and written in place inside packed buffers — Q, K, V of
// one (B, T, (Hq+2·Hkv)·D) buffer, O inside a wider (B, T, Hq·D + 5) one, and dQ, dK, dV into one packed
// gradient buffer — to give bit for bit the results of dense operands, and to leave every element outside
// the operands untouched.
func TestAttentionStridedOperands(t *testing.T) {
	b := New()
	c := attnCase{name: "packed", B: 2, Hq: 4, Hkv: 2, Tq: 7, Tk: 7, D: 3, mask: true, causal: true, p: 0.2}
	rng := newRNG(t)
	mask, _ := c.inputs(rng)
	T, D, W := c.Tq, c.D, (c.Hq+2*c.Hkv)*c.D
	qkv := f32s(randn(rng, c.B*T*W, 1))
	dout := f32s(randn(rng, c.B*c.Hq*T*D, 1))
	// dense (B, H, T, D) copies of the packed heads
	dense := func(src []float32, w, off, h int) []float32 {
		out := make([]float32, c.B*h*T*D)
		for bb := 0; bb < c.B; bb++ {
			for hh := 0; hh < h; hh++ {
				for i := 0; i < T; i++ {
					copy(out[((bb*h+hh)*T+i)*D:][:D], src[(bb*T+i)*w+off+hh*D:][:D])
				}
			}
		}
		return out
	}
	q, k, v := dense(qkv, W, 0, c.Hq), dense(qkv, W, c.Hq*D, c.Hkv), dense(qkv, W, (c.Hq+c.Hkv)*D, c.Hkv)
	WO, WG := c.Hq*D+5, W+2 // O and the gradient buffer have 5 and 2 spare channels per row
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			wo, _, wdq, wdk, wdv := fused(t, b, c, dt, mask, nil, q, k, v, dense(dout, c.Hq*D, 0, c.Hq))
			fill := func(n int) []float32 {
				v := make([]float32, n)
				for i := range v {
					v[i] = 9
				}
				return v
			}
			QKV, O := put(t, b, dt, qkv, c.B, T, W), put(t, b, dt, fill(c.B*T*WO), c.B, T, WO)
			G := put(t, b, dt, fill(c.B*T*WG), c.B, T, WG)
			at := func(x *tensor.Tensor, off, w int) tensor.AttnOperand {
				v, err := x.View(off, x.Numel()-off)
				if err != nil {
					t.Fatal(err)
				}
				return tensor.AttnOperand{T: v, StrideB: T * w, StrideH: D, StrideT: w}
			}
			a := tensor.AttentionArgs{B: c.B, Hq: c.Hq, Hkv: c.Hkv, Tq: T, Tk: T, D: D, Q: at(QKV, 0, W),
				K: at(QKV, c.Hq*D, W), V: at(QKV, (c.Hq+c.Hkv)*D, W), O: at(O, 0, WO), LSE: mustAlloc(t, b, tensor.F32, c.B*c.Hq*T),
				Scale: float32(1 / math.Sqrt(float64(D))), Mask: put(t, b, tensor.F32, mask, c.B, T), Causal: true, DropoutP: c.p, Seed: 7, Offset: 3}
			if err := b.Attention(a); err != nil {
				t.Fatal(err)
			}
			ba := tensor.AttentionBackwardArgs{AttentionArgs: a, DO: at(put(t, b, dt, dout, c.B, T, c.Hq*D), 0, c.Hq*D),
				DQ: at(G, 0, WG), DK: at(G, c.Hq*D, WG), DV: at(G, (c.Hq+c.Hkv)*D, WG)}
			if err := b.AttentionBackward(ba); err != nil {
				t.Fatal(err)
			}
			o, g := get(t, b, O), get(t, b, G)
			for _, r := range []struct {
				name      string
				got, want []float32
			}{{"O", dense(o, WO, 0, c.Hq), wo}, {"dQ", dense(g, WG, 0, c.Hq), wdq}, {"dK", dense(g, WG, c.Hq*D, c.Hkv), wdk},
				{"dV", dense(g, WG, (c.Hq+c.Hkv)*D, c.Hkv), wdv}} {
				for i := range r.want {
					if math.Float32bits(r.got[i]) != math.Float32bits(r.want[i]) {
						t.Fatalf("%s[%d] = %v in place, %v with dense operands", r.name, i, r.got[i], r.want[i])
					}
				}
			}
			for row := 0; row < c.B*T; row++ {
				for _, x := range o[row*WO+c.Hq*D : (row+1)*WO] {
					if x != 9 {
						t.Fatalf("O's spare channels of row %d were written: %v", row, o[row*WO:(row+1)*WO])
					}
				}
				for _, x := range g[row*WG+W : (row+1)*WG] {
					if x != 9 {
						t.Fatalf("the gradient buffer's spare channels of row %d were written", row)
					}
				}
			}
		})
	}
}

// BenchmarkAttention times the reference's forward and backward at BERT-tiny's attention shape with dropout
// (B 32, H 2, T 128, D 32), reporting GFLOP/s of the 4 + 8 products' 12·B·H·T²·D.
func BenchmarkAttention(b *testing.B) {
	c := attnCase{B: 32, Hq: 2, Hkv: 2, Tq: 128, Tk: 128, D: 32, p: 0.1}
	rng := rand.New(rand.NewPCG(1, 2))
	pr := &attnProblem[float32]{B: c.B, Hq: c.Hq, Hkv: c.Hkv, Tq: c.Tq, Tk: c.Tk, D: c.D, scale: 0.17, p: c.p, seed: 1}
	nq := c.B * c.Hq * c.Tq * c.D
	q, k, v, g := f32s(randn(rng, nq, 1)), f32s(randn(rng, nq, 1)), f32s(randn(rng, nq, 1)), f32s(randn(rng, nq, 1))
	o, lse := make([]float32, nq), make([]float32, c.B*c.Hq*c.Tq)
	dq, dk, dv := make([]float32, nq), make([]float32, nq), make([]float32, nq)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		attnForwardKernel(pr, o, lse, q, k, v)
		attnBackwardKernel(pr, dq, dk, dv, q, k, v, o, lse, g)
	}
	b.ReportMetric(12*float64(c.B*c.Hq*c.Tq*c.Tk*c.D)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// TestAttentionFastMatchesReference compares the fast FP32 kernels with the reference kernels directly on every
// case of attnCases and on larger shapes (several query blocks, BERT-tiny's and BERT-base's head sizes, GQA,
// mask and dropout): O, LSE, dQ, dK and dV to FP32 rounding (2e-6·max(1, |reference|)). That both drop the
// same elements is TestAttentionDropoutMaskIsDropouts's, which runs the backend's (fast) path.
func TestAttentionFastMatchesReference(t *testing.T) {
	if !hasSIMD {
		t.Skip("no AVX-512 kernels on this processor")
	}
	cases := append([]attnCase{
		{name: "tiny BERT head", B: 4, Hq: 4, Hkv: 4, Tq: 20, Tk: 20, D: 16, mask: true, p: 0.1},
		{name: "blocks", B: 2, Hq: 2, Hkv: 1, Tq: 131, Tk: 77, D: 64, mask: true, causal: true, p: 0.2},
		{name: "wide", B: 1, Hq: 3, Hkv: 3, Tq: 65, Tk: 65, D: 33, segments: true, p: 0.1},
		{name: "long rows", B: 3, Hq: 2, Hkv: 1, Tq: 70, Tk: 77, D: 16, mask: true, fullyMasked: true, p: 0.1},
	}, attnCases...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := newRNG(t)
			mask, seg := c.inputs(rng)
			pr := &attnProblem[float32]{B: c.B, Hq: c.Hq, Hkv: c.Hkv, Tq: c.Tq, Tk: c.Tk, D: c.D,
				scale: float32(1 / math.Sqrt(float64(c.D))), mask: mask, seg: seg, causal: c.causal, p: c.p, seed: 7, offset: 3}
			nq, nk := c.B*c.Hq*c.Tq*c.D, c.B*c.Hkv*c.Tk*c.D
			q, k, v, g := f32s(randn(rng, nq, 1)), f32s(randn(rng, nk, 1)), f32s(randn(rng, nk, 1)), f32s(randn(rng, nq, 1))
			run := func(fast bool) [][]float32 {
				o, lse := make([]float32, nq), make([]float32, c.B*c.Hq*c.Tq)
				dq, dk, dv := make([]float32, nq), make([]float32, nk), make([]float32, nk)
				if fast {
					dn := func(x []float32, h, t int) attnView { return denseView(x, h, t, c.D) }
					attnForwardFast(pr, dn(o, c.Hq, c.Tq), lse, dn(q, c.Hq, c.Tq), dn(k, c.Hkv, c.Tk), dn(v, c.Hkv, c.Tk))
					attnBackwardFast(pr, dn(dq, c.Hq, c.Tq), dn(dk, c.Hkv, c.Tk), dn(dv, c.Hkv, c.Tk), dn(q, c.Hq, c.Tq),
						dn(k, c.Hkv, c.Tk), dn(v, c.Hkv, c.Tk), lse, dn(g, c.Hq, c.Tq))
				} else {
					attnForwardKernel(pr, o, lse, q, k, v)
					attnBackwardKernel(pr, dq, dk, dv, q, k, v, o, lse, g)
				}
				return [][]float32{o, lse, dq, dk, dv}
			}
			got, want := run(true), run(false)
			for i, name := range []string{"O", "LSE", "dQ", "dK", "dV"} {
				near(t, name, got[i], f64(want[i]), 2e-6)
			}
		})
	}
}
