//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// f32Case is one problem for the FP32 GEMM path of fused attention (cuda/attention_f32.go).
type f32Case struct {
	attnShape
	layout      int  // 0 dense (B, H, T, D); 1 rows: each operand its own (B, T, H·D) buffer (Llama's); 2 packed: Q, K, V in one (B, T, (Hq+2Hkv)·D) buffer and dQ, dK, dV in one gradient buffer of that shape, O and dO (B, T, Hq·D) (BERT's; needs Tq == Tk)
	allMasked   bool // batch member 0 has every key masked with −Inf: rows with no visible key
	scratch     int  // the path's scratch bound in bytes (0 the default)
	causalBlock int  // the causal row block (0 the default)
	refForward  bool // the forward on the general kernels (which store no KeepBits), the backward on the GEMM path
}

func (c f32Case) String() string {
	return fmt.Sprintf("%v_layout%d_allmasked%v_scratch%d_cblock%d_refwd%v", c.attnShape, c.layout, c.allMasked, c.scratch, c.causalBlock, c.refForward)
}

var f32Cases = []f32Case{
	{attnShape: attnShape{B: 2, Hq: 4, Hkv: 2, Tq: 77, Tk: 77, D: 64, mask: true}, allMasked: true},
	{attnShape: attnShape{B: 3, Hq: 2, Hkv: 2, Tq: 50, Tk: 131, D: 32, causal: true}, layout: 1},
	// Tq > Tk, causal, small row blocks: the first blocks see no key (LSE = −Inf, O and dQ zeroed).
	{attnShape: attnShape{B: 2, Hq: 2, Hkv: 1, Tq: 90, Tk: 33, D: 64, causal: true}, causalBlock: 16},
	{attnShape: attnShape{B: 2, Hq: 2, Hkv: 2, Tq: 100, Tk: 100, D: 64, seg: true, p: 0.1}, layout: 2},
	{attnShape: attnShape{B: 2, Hq: 3, Hkv: 1, Tq: 37, Tk: 37, D: 16, mask: true, p: 0.2}, layout: 1}, // Tk % 4 != 0: two Philox blocks per four keys
	{attnShape: attnShape{B: 1, Hq: 4, Hkv: 2, Tq: 64, Tk: 64, D: 128, causal: true, mask: true, p: 0.15}, layout: 2},
	{attnShape: attnShape{B: 2, Hq: 2, Hkv: 2, Tq: 45, Tk: 45, D: 24, mask: true, p: 0.1, unaligned: true}},
	// B < Hkv: jobs along the KV heads (one query head of each group per chunk), GQA 6/3.
	{attnShape: attnShape{B: 1, Hq: 6, Hkv: 3, Tq: 70, Tk: 70, D: 64, mask: true, p: 0.1}, layout: 2},
	// Chunks that split the batch unevenly (5 jobs: forward 3 + 2, backward 2 + 2 + 1).
	// (No mask: data() masks batch member 4 entirely with −1e4, where FP32 rounds s − 1e4 to 1e-3.)
	{attnShape: attnShape{B: 5, Hq: 4, Hkv: 2, Tq: 40, Tk: 40, D: 64, p: 0.1}, layout: 2, scratch: 2 * 2 * 40 * 40 * 4},
	// A head's rows split into blocks (16 rows backward, the floor; 26 forward): dK and dV summed over blocks and heads.
	{attnShape: attnShape{B: 3, Hq: 4, Hkv: 1, Tq: 40, Tk: 40, D: 64, seg: true, p: 0.2}, layout: 1, scratch: 40 * 40 * 4 * 2 / 3},
	// Causal blocks with their own key counts, GQA along the KV heads, uneven chunks.
	{attnShape: attnShape{B: 1, Hq: 10, Hkv: 5, Tq: 130, Tk: 130, D: 64, causal: true, mask: true}, layout: 2, causalBlock: 32, scratch: 3 * 32 * 132 * 4 * 2}, // backward 3 + 2 KV heads
	// KeepBits: the forward stores its draws, the backward reads them (Tk ≤ 512): segments, Tk % 4 != 0,
	// causal blocks that differ between the passes (forward 32 rows, backward 16), row blocks and uneven
	// chunks; and Tk > 512, where both passes draw.
	{attnShape: attnShape{B: 2, Hq: 2, Hkv: 2, Tq: 100, Tk: 100, D: 64, seg: true, p: 0.1, keepBits: true}, layout: 2},
	{attnShape: attnShape{B: 2, Hq: 3, Hkv: 1, Tq: 37, Tk: 37, D: 16, mask: true, p: 0.2, keepBits: true}, layout: 1},
	{attnShape: attnShape{B: 1, Hq: 4, Hkv: 2, Tq: 64, Tk: 64, D: 128, causal: true, mask: true, p: 0.15, keepBits: true}, layout: 2, scratch: 32 * 64 * 4},
	{attnShape: attnShape{B: 5, Hq: 4, Hkv: 2, Tq: 40, Tk: 40, D: 64, p: 0.1, keepBits: true}, layout: 2, scratch: 2 * 2 * 40 * 40 * 4}, // no mask: see above
	{attnShape: attnShape{B: 1, Hq: 2, Hkv: 2, Tq: 24, Tk: 600, D: 64, mask: true, p: 0.1, keepBits: true}, layout: 1},
	// Dense operands of one head per KV head: (batch, head) pairs merged into one job axis (f32Merged). Key
	// padding with batch member 0 fully masked (a pair's b taken wrongly would mask the others), dropout with
	// KeepBits; segments with the merged pairs split unevenly (forward 5 + 4, backward 3 + 3 + 3); causal row
	// blocks.
	{attnShape: attnShape{B: 3, Hq: 2, Hkv: 2, Tq: 77, Tk: 77, D: 64, mask: true, p: 0.1, keepBits: true}, allMasked: true},
	{attnShape: attnShape{B: 3, Hq: 3, Hkv: 3, Tq: 40, Tk: 40, D: 32, seg: true, p: 0.2}, scratch: 2 * 4 * 40 * 40 * 4},
	{attnShape: attnShape{B: 2, Hq: 3, Hkv: 3, Tq: 70, Tk: 70, D: 64, causal: true, mask: true}, causalBlock: 32},
	// The rows layouts (BERT's packed, Llama's) of one head per KV head: pairs through pointer arrays (f32Pairs),
	// with a fully masked member 0, KeepBits and uneven chunks of pairs; causal row blocks.
	{attnShape: attnShape{B: 3, Hq: 3, Hkv: 3, Tq: 40, Tk: 40, D: 32, mask: true, p: 0.1, keepBits: true}, layout: 1, allMasked: true, scratch: 2 * 4 * 40 * 40 * 4},
	{attnShape: attnShape{B: 2, Hq: 3, Hkv: 3, Tq: 70, Tk: 70, D: 64, causal: true, mask: true, p: 0.1}, layout: 2, causalBlock: 32},
	// A forward that stored no bits (the general kernels): the backward draws its own.
	{attnShape: attnShape{B: 2, Hq: 2, Hkv: 2, Tq: 64, Tk: 64, D: 64, mask: true, p: 0.1, keepBits: true}, layout: 2, refForward: true},
}

// runF32 runs Attention and AttentionBackward of c on be in F32 through c's layout and returns the results in
// dense order (O and dQ (B, Hq, Tq, D), dK and dV (B, Hkv, Tk, D), LSE (B, Hq, Tq)). Outputs start as NaN, so an
// element the op does not write shows.
func runF32(t testing.TB, be tensor.Backend, c f32Case, d attnData) attnResult {
	t.Helper()
	s := c.attnShape
	if c.allMasked {
		d.mask = append([]float32(nil), d.mask...)
		if d.mask == nil {
			d.mask = make([]float32, s.B*s.Tk)
		}
		for j := 0; j < s.Tk; j++ {
			d.mask[j] = float32(math.Inf(-1))
		}
	}
	var live []*tensor.Tensor
	defer func() {
		for _, x := range live {
			be.Free(x)
		}
	}()
	alloc := func(dt tensor.DType, host []float32) *tensor.Tensor {
		off := 0
		if s.unaligned {
			off = 1
		}
		x, err := be.Alloc(dt, len(host)+off)
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, x)
		if off > 0 {
			if x, err = x.View(off, len(host)); err != nil {
				t.Fatal(err)
			}
		}
		if err := be.Upload(x, host); err != nil {
			t.Fatal(err)
		}
		return x
	}
	nan := float32(math.NaN())
	filled := func(n int, v float32) []float32 {
		h := make([]float32, n)
		for i := range h {
			h[i] = v
		}
		return h
	}
	// An operand's host storage and strides: element (b, h, t, :) at off + b·sb + h·sh + t·st.
	type opnd struct {
		off        int
		sb, sh, st int
		heads, seq int
		tensor     *tensor.Tensor
		logical    []float32
		out        bool
	}
	mkOp := func(heads, seq int, logical []float32, out bool) *opnd {
		o := &opnd{heads: heads, seq: seq, logical: logical, out: out}
		switch c.layout {
		case 0:
			o.sb, o.sh, o.st = heads*seq*s.D, seq*s.D, s.D
		default:
			o.sb, o.sh, o.st = seq*heads*s.D, s.D, heads*s.D
		}
		return o
	}
	place := func(o *opnd, dst []float32) {
		for b := 0; b < s.B; b++ {
			for h := 0; h < o.heads; h++ {
				for x := 0; x < o.seq; x++ {
					copy(dst[o.off+b*o.sb+h*o.sh+x*o.st:][:s.D], o.logical[((b*o.heads+h)*o.seq+x)*s.D:][:s.D])
				}
			}
		}
	}
	gather := func(o *opnd, src []float32) []float32 {
		out := make([]float32, s.B*o.heads*o.seq*s.D)
		for b := 0; b < s.B; b++ {
			for h := 0; h < o.heads; h++ {
				for x := 0; x < o.seq; x++ {
					copy(out[((b*o.heads+h)*o.seq+x)*s.D:][:s.D], src[o.off+b*o.sb+h*o.sh+x*o.st:][:s.D])
				}
			}
		}
		return out
	}
	down := func(x *tensor.Tensor) []float32 {
		v := make([]float32, x.Numel())
		if err := be.Download(v, x); err != nil {
			t.Fatal(err)
		}
		return v
	}
	nq, nk := s.B*s.Hq*s.Tq*s.D, s.B*s.Hkv*s.Tk*s.D
	q, k, v := mkOp(s.Hq, s.Tq, d.q, false), mkOp(s.Hkv, s.Tk, d.k, false), mkOp(s.Hkv, s.Tk, d.v, false)
	o, do := mkOp(s.Hq, s.Tq, make([]float32, nq), true), mkOp(s.Hq, s.Tq, d.do, false)
	dq, dk, dv := mkOp(s.Hq, s.Tq, make([]float32, nq), true), mkOp(s.Hkv, s.Tk, make([]float32, nk), true), mkOp(s.Hkv, s.Tk, make([]float32, nk), true)
	if c.layout == 2 {
		if s.Tq != s.Tk {
			t.Fatal("packed layout needs Tq == Tk")
		}
		w := (s.Hq + 2*s.Hkv) * s.D
		for i, x := range []*opnd{q, k, v} {
			x.sb, x.sh, x.st, x.off = s.Tq*w, s.D, w, []int{0, s.Hq * s.D, (s.Hq + s.Hkv) * s.D}[i]
		}
		for i, x := range []*opnd{dq, dk, dv} {
			x.sb, x.sh, x.st, x.off = s.Tq*w, s.D, w, []int{0, s.Hq * s.D, (s.Hq + s.Hkv) * s.D}[i]
		}
		host := filled(s.B*s.Tq*w, 7)
		for _, x := range []*opnd{q, k, v} {
			place(x, host)
		}
		qkvT, gradT := alloc(tensor.F32, host), alloc(tensor.F32, filled(s.B*s.Tq*w, nan))
		q.tensor, k.tensor, v.tensor = qkvT, qkvT, qkvT
		dq.tensor, dk.tensor, dv.tensor = gradT, gradT, gradT
	}
	size := func(x *opnd) int { return s.B * x.sb }
	for _, x := range []*opnd{q, k, v, o, do, dq, dk, dv} {
		if x.tensor != nil {
			continue
		}
		if x.out {
			x.tensor = alloc(tensor.F32, filled(size(x), nan))
			continue
		}
		host := filled(size(x), 7)
		place(x, host)
		x.tensor = alloc(tensor.F32, host)
	}
	ao := func(x *opnd) tensor.AttnOperand {
		t := x.tensor
		if x.off > 0 {
			var err error
			if t, err = t.View(x.off, t.Numel()-x.off); err != nil {
				panic(err)
			}
		}
		return tensor.AttnOperand{T: t, StrideB: x.sb, StrideH: x.sh, StrideT: x.st}
	}
	// The operands' views start at x.off; place and gather index the whole buffer.
	a := tensor.AttentionArgs{B: s.B, Hq: s.Hq, Hkv: s.Hkv, Tq: s.Tq, Tk: s.Tk, D: s.D,
		Q: ao(q), K: ao(k), V: ao(v), O: ao(o), LSE: alloc(tensor.F32, filled(s.B*s.Hq*s.Tq, nan)),
		Scale: float32(1 / math.Sqrt(float64(s.D))), Causal: s.causal, DropoutP: s.p, Seed: 1234, Offset: 77}
	if d.mask != nil {
		a.Mask = alloc(tensor.F32, d.mask)
	}
	if s.keepBits { // garbage where the forward stores its draws
		n := tensor.AttentionKeepBitsLen(s.B, s.Hq, s.Tq, s.Tk)
		kb, err := be.Alloc(tensor.I32, n)
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, kb)
		junk := make([]int32, n)
		for i := range junk {
			junk[i] = int32(i*0x9E3779B1) ^ 0x5a5a5a5a
		}
		if err := be.Upload(kb, junk); err != nil {
			t.Fatal(err)
		}
		a.KeepBits = kb
	}
	if d.seg != nil {
		seg, err := be.Alloc(tensor.I32, len(d.seg))
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, seg)
		if err := be.Upload(seg, d.seg); err != nil {
			t.Fatal(err)
		}
		a.Segments = seg
	}
	restore := func() {}
	if c.refForward {
		restore = cuda.SetAttnF32Ref(true)
	}
	err := be.Attention(a)
	restore()
	if err != nil {
		t.Fatal(err)
	}
	ba := tensor.AttentionBackwardArgs{AttentionArgs: a, DO: ao(do), DQ: ao(dq), DK: ao(dk), DV: ao(dv)}
	if err := be.AttentionBackward(ba); err != nil {
		t.Fatal(err)
	}
	whole := func(x *opnd) []float32 { return down(x.tensor) }
	return attnResult{o: gather(o, whole(o)), lse: down(a.LSE), dq: gather(dq, whole(dq)), dk: gather(dk, whole(dk)), dv: gather(dv, whole(dv))}
}

// ref64 is attention forward and backward of c in float64 on the host, straight from docs/ATTENTION.md's
// formulas (dropout through tensor.PhiloxKeep, rows with no visible key O = 0, LSE = −Inf, zero gradients).
func ref64(c f32Case, d attnData) attnResult {
	s := c.attnShape
	mask := d.mask
	if c.allMasked {
		mask = append([]float32(nil), mask...)
		if mask == nil {
			mask = make([]float32, s.B*s.Tk)
		}
		for j := 0; j < s.Tk; j++ {
			mask[j] = float32(math.Inf(-1))
		}
	}
	G, D := s.Hq/s.Hkv, s.D
	scale := float64(float32(1 / math.Sqrt(float64(D))))
	dscale := 1.0
	if s.p > 0 {
		dscale = float64(1 / (1 - s.p))
	}
	nq, nk := s.B*s.Hq*s.Tq*D, s.B*s.Hkv*s.Tk*D
	o, dq := make([]float64, nq), make([]float64, nq)
	dk, dv := make([]float64, nk), make([]float64, nk)
	lse := make([]float32, s.B*s.Hq*s.Tq)
	sc, pr, kp := make([]float64, s.Tk), make([]float64, s.Tk), make([]float64, s.Tk)
	for b := 0; b < s.B; b++ {
		for h := 0; h < s.Hq; h++ {
			hk := h / G
			for i := 0; i < s.Tq; i++ {
				qi := d.q[((b*s.Hq+h)*s.Tq+i)*D:][:D]
				doi := d.do[((b*s.Hq+h)*s.Tq+i)*D:][:D]
				m := math.Inf(-1)
				for j := 0; j < s.Tk; j++ {
					sc[j] = math.Inf(-1)
					if s.causal && j > i+s.Tk-s.Tq {
						continue
					}
					if d.seg != nil && d.seg[b*s.Tq+i] != d.seg[b*s.Tk+j] {
						continue
					}
					mk := 0.0
					if mask != nil {
						mk = float64(mask[b*s.Tk+j])
					}
					if math.IsInf(mk, -1) {
						continue
					}
					kj := d.k[((b*s.Hkv+hk)*s.Tk+j)*D:][:D]
					var dot float64
					for x := 0; x < D; x++ {
						dot += float64(qi[x]) * float64(kj[x])
					}
					sc[j] = dot*scale + mk
					m = math.Max(m, sc[j])
				}
				row := (b*s.Hq+h)*s.Tq + i
				if math.IsInf(m, -1) {
					lse[row] = float32(math.Inf(-1))
					continue
				}
				var l float64
				for j := range sc {
					l += math.Exp(sc[j] - m)
				}
				ls := m + math.Log(l)
				lse[row] = float32(ls)
				var delta float64
				dpv := make([]float64, s.Tk)
				for j := 0; j < s.Tk; j++ {
					pr[j] = math.Exp(sc[j] - ls)
					kp[j] = 1
					if s.p > 0 {
						kp[j] = 0
						if tensor.PhiloxKeep(1234, 77, row*s.Tk+j, s.p) {
							kp[j] = dscale
						}
					}
					vj := d.v[((b*s.Hkv+hk)*s.Tk+j)*D:][:D]
					for x := 0; x < D; x++ {
						o[row*D+x] += pr[j] * kp[j] * float64(vj[x])
						dpv[j] += float64(doi[x]) * float64(vj[x])
					}
					dpv[j] *= kp[j]
					delta += pr[j] * dpv[j]
				}
				for j := 0; j < s.Tk; j++ {
					ds := pr[j] * (dpv[j] - delta)
					kb, vb := ((b*s.Hkv+hk)*s.Tk+j)*D, ((b*s.Hkv+hk)*s.Tk+j)*D
					for x := 0; x < D; x++ {
						dq[row*D+x] += scale * ds * float64(d.k[kb+x])
						dk[kb+x] += scale * ds * float64(qi[x])
						dv[vb+x] += pr[j] * kp[j] * float64(doi[x])
					}
				}
			}
		}
	}
	f := func(x []float64) []float32 {
		out := make([]float32, len(x))
		for i, v := range x {
			out[i] = float32(v)
		}
		return out
	}
	return attnResult{o: f(o), lse: lse, dq: f(dq), dk: f(dk), dv: f(dv)}
}

// TestAttentionF32MatchesRefAndFP64 compares the FP32 GEMM path with the general kernels (attn_*_ref, forced
// with cuda.SetAttnF32Ref) on the same layout and with a float64 host reference, at FP32 tolerance: odd T,
// Tq ≠ Tk, key padding incl. a fully masked batch member, causal (Tq > Tk: rows with no key), segments, GQA
// along either chunk axis, dropout (the Dropout op's keep bits), unaligned and strided (Llama's and BERT's
// packed) operands, chunks that split the (batch, head) pairs unevenly and row blocks within a head.
func TestAttentionF32MatchesRefAndFP64(t *testing.T) {
	gpu := openOrSkip(t)
	for i, c := range f32Cases {
		t.Run(c.String(), func(t *testing.T) { checkF32Case(t, gpu, c, uint64(i+31)) })
	}
}

// checkF32Case is one case of TestAttentionF32MatchesRefAndFP64.
func checkF32Case(t *testing.T, gpu *cuda.Backend, c f32Case, seed uint64) {
	d := c.data(seed)
	if c.scratch > 0 {
		defer cuda.SetAttnF32Scratch(c.scratch)()
	}
	if c.causalBlock > 0 {
		defer cuda.SetAttnF32CausalBlock(c.causalBlock)()
	}
	fast := runF32(t, gpu, c, d)
	restore := cuda.SetAttnF32Ref(true)
	slow := runF32(t, gpu, c, d)
	restore()
	want := ref64(c, d)
	for _, x := range []struct {
		name      string
		got, want []float32
	}{{"O", fast.o, want.o}, {"LSE", fast.lse, want.lse}, {"dQ", fast.dq, want.dq}, {"dK", fast.dk, want.dk}, {"dV", fast.dv, want.dv}} {
		closeTo(t, x.name+" (GEMM path vs float64)", x.got, x.want, 1e-5)
	}
	for _, x := range []struct {
		name      string
		got, want []float32
	}{{"O", fast.o, slow.o}, {"LSE", fast.lse, slow.lse}, {"dQ", fast.dq, slow.dq}, {"dK", fast.dk, slow.dk}, {"dV", fast.dv, slow.dv}} {
		closeTo(t, x.name+" (GEMM path vs attn_*_ref)", x.got, x.want, 1e-5)
	}
	closeTo(t, "dQ (attn_*_ref vs float64)", slow.dq, want.dq, 1e-5)
	if c.allMasked {
		for h := 0; h < c.Hq; h++ {
			for i := 0; i < c.Tq; i++ {
				if l := fast.lse[h*c.Tq+i]; !math.IsInf(float64(l), -1) {
					t.Fatalf("fully masked batch member: LSE[0, %d, %d] = %v, want -Inf", h, i, l)
				}
			}
		}
		for x := 0; x < c.Hq*c.Tq*c.D; x++ {
			if fast.o[x] != 0 || fast.dq[x] != 0 {
				t.Fatalf("fully masked batch member: O[%d] = %v, dQ[%d] = %v, want 0", x, fast.o[x], x, fast.dq[x])
			}
		}
	}
}

// TestAttentionF32Deterministic runs the FP32 GEMM path twice and requires identical bits (GQA sums, row
// blocks and chunks in a fixed order; no atomics).
func TestAttentionF32Deterministic(t *testing.T) {
	gpu := openOrSkip(t)
	for _, c := range []f32Case{
		{attnShape: attnShape{B: 4, Hq: 8, Hkv: 2, Tq: 200, Tk: 200, D: 64, mask: true, p: 0.1}, layout: 2, scratch: 3 * 200 * 200 * 4 * 2},
		{attnShape: attnShape{B: 1, Hq: 4, Hkv: 2, Tq: 300, Tk: 300, D: 128, causal: true, p: 0.1}, layout: 1, causalBlock: 64},
		{attnShape: attnShape{B: 3, Hq: 4, Hkv: 4, Tq: 130, Tk: 130, D: 64, mask: true, p: 0.1}, layout: 2, scratch: 5 * 130 * 132 * 4 * 2}, // pointer arrays
	} {
		t.Run(c.String(), func(t *testing.T) {
			d := c.data(5)
			if c.scratch > 0 {
				defer cuda.SetAttnF32Scratch(c.scratch)()
			}
			if c.causalBlock > 0 {
				defer cuda.SetAttnF32CausalBlock(c.causalBlock)()
			}
			r1, r2 := runF32(t, gpu, c, d), runF32(t, gpu, c, d)
			for _, x := range []struct {
				name string
				a, b []float32
			}{{"O", r1.o, r2.o}, {"LSE", r1.lse, r2.lse}, {"dQ", r1.dq, r2.dq}, {"dK", r1.dk, r2.dk}, {"dV", r1.dv, r2.dv}} {
				for i := range x.a {
					if math.Float32bits(x.a[i]) != math.Float32bits(x.b[i]) {
						t.Fatalf("%s[%d] = %v, then %v: not bit-identical run to run", x.name, i, x.a[i], x.b[i])
					}
				}
			}
		})
	}
}
