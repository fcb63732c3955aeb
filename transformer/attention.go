package transformer

import (
	"errors"
	"fmt"
	"math"

	"github.com/tune-ml/tune/tensor"
)

// MaskedScore is the additive attention-mask value of a padding key: torch.finfo(float32).min, as transformers
// builds the eager mask (masking_utils, transformers/models/bert/modeling_bert.py); 0 is added for an attended key. Using the finite minimum
// rather than -Inf mirrors transformers exactly, including the corner case of a sequence that is all padding,
// whose rows then attend uniformly instead of giving zeros.
const MaskedScore = -math.MaxFloat32

// The attention implementations, named as transformers' attn_implementation names them.
const (
	// AttnSDPA is the fused attention op (tensor.Backend.Attention: FlashAttention-2 on the GPU), the default:
	// no (B, H, T, T) buffer, no head permutes. transformers' "sdpa" (torch's scaled_dot_product_attention).
	AttnSDPA = "sdpa"
	// AttnEager is the two-pass path: scores and probabilities materialised per head (Gemm → Softmax → Dropout
	// → Gemm), kept as the reference and taken automatically for shapes the backend's fused kernel refuses.
	AttnEager = "eager"
)

// CheckAttnImplementation returns nil for "", "sdpa" and "eager" and an error naming the accepted values
// otherwise.
func CheckAttnImplementation(impl string) error {
	switch impl {
	case "", AttnSDPA, AttnEager:
		return nil
	}
	return fmt.Errorf("attn_implementation %q is not supported: use %q (fused attention, the default) or %q (the two-pass reference)",
		impl, AttnSDPA, AttnEager)
}

// SelfAttention is BertSelfAttention: per head (D = C/H, scaling = D^−½)
//
//	scores = Q·Kᵀ·scaling + mask,  P = softmax(scores),  ctx = dropout(P)·V,  heads merged back to (B, T, C).
//
// Two implementations compute it (Impl). "sdpa", the default, is the fused op (tensor.Backend.Attention,
// docs/ATTENTION.md): the projections write Q, K and V into one (B, T, 3C) buffer (a LinearStack: one
// (N, 3C) GEMM over the adjacent weights with the packed bias in its epilogue, or three GEMMs with row stride
// 3C; LoRA adapters add their terms into their blocks; separate (B, T, C) buffers when a projection is
// neither a plain *Linear nor an Adapter), the op reads
// the heads in place through strides and writes ctx as (B, T, C), and its backward writes dQ, dK, dV into one
// (B, T, 3C) gradient buffer; per layer only Q, K, V, ctx and the (B, H, T) FP32 log-sum-exp are kept.
// "eager" is the two-pass path below, with dropout drawn from the same Philox elements, so both give the same
// result up to rounding.
//
// Numerics of eager (transformers' eager_attention_forward under PyTorch autocast; docs/ATTENTION.md): the three projections and both attention products are GEMM-class
// (GEMM dtype h: F32, or F16/BF16 under autocast). The scores GEMM writes F32 (FP32 accumulation, scaling
// applied in FP32 as its alpha), the mask add and softmax are FP32, dropout runs on the F32 probabilities, and
// they are rounded to h only as the input of P·V. PyTorch eager instead rounds the QKᵀ product to half before
// its FP32 softmax; the difference is within half precision of the scores.
type SelfAttention struct {
	Query, Key, Value Projection // (C → C) each
	Heads, HeadDim    int        // H and D = C/H
	Dropout           float32    // attention_probs_dropout_prob

	stack *LinearStack // the three plain Linears as one packed projection (packable), or nil
	c     attentionCache
}

// attentionCache holds one pass's activations; h is the pass's GEMM dtype.
type attentionCache struct {
	impl    string         // the implementation this pass was laid out for (AttnSDPA or AttnEager)
	packed  bool           // sdpa: Q, K, V share the (B, T, 3C) buffer qkv
	qkv     *tensor.Tensor // sdpa packed: (B, T, 3C) h projections, kept for backward
	lse     *tensor.Tensor // sdpa: (B, H, T) F32 log-sum-exp of the score rows, kept for backward
	keep    *tensor.Tensor // sdpa with dropout: the fused op's KeepBits (the forward's dropout bits), kept for backward
	q, k, v *tensor.Tensor // (B, T, C) h projections: eager's shared scratch, or sdpa's kept unpacked buffers
	out     *tensor.Tensor // sdpa: the forward's output (B, T, C) h (the layer keeps it), read by the backward
	mask    *tensor.Tensor // sdpa: the forward's (B, T) F32 key mask

	qt, kt, vt *tensor.Tensor // eager: (B, H, T, D) h heads split, kept for backward
	probs      *tensor.Tensor // eager: (B, H, T, T) F32 softmax output, kept for the softmax backward
	probsH     *tensor.Tensor // eager: (B, H, T, T) h dropout(probs) as P·V reads it; nil when it can alias probs
	pv         *tensor.Tensor // eager: (B, H, T, T) the P·V input of the last Forward (probs or probsH)
	dropOff    uint64
	dropUsed   bool
}

// attentionScratch is shared by every layer of one pass (forward and backward use it in turn).
type attentionScratch struct {
	dqkv *tensor.Tensor // sdpa: (B, T, 3C) h gradient of the projections (or three (B, T, C) blocks)

	scores   *tensor.Tensor // eager: (B, H, T, T) F32 QKᵀ·scaling; in backward the F32 gradient of the scores
	scoresH  *tensor.Tensor // eager: (B, H, T, T) h the scores gradient as GEMM input; nil when h is F32
	dProbs   *tensor.Tensor // eager: (B, H, T, T) F32 gradient of the probabilities
	ctxT     *tensor.Tensor // eager: (B, H, T, D) h per-head context; in backward its gradient
	dqt, dkt *tensor.Tensor // eager: (B, H, T, D) h
	dvt      *tensor.Tensor // eager: (B, H, T, D) h
}

// layoutAttentionScratch takes the buffers shared by every layer's attention for a (B, T) pass with C = H·D.
func layoutAttentionScratch(a *Arena, impl string, b, t, h, d int, dt tensor.DType) attentionScratch {
	if impl == AttnSDPA {
		return attentionScratch{dqkv: a.Take(dt, b*t, 3*h*d)}
	}
	return attentionScratch{
		scores: a.Take(tensor.F32, b, h, t, t), scoresH: takeIfCast(a, dt, tensor.F32, b, h, t, t),
		dProbs: a.Take(tensor.F32, b, h, t, t), ctxT: a.Take(dt, b, h, t, d),
		dqt: a.Take(dt, b, h, t, d), dkt: a.Take(dt, b, h, t, d), dvt: a.Take(dt, b, h, t, d),
	}
}

// takeKeepBits takes the fused op's KeepBits, (B, H, T, ⌈T/64⌉·2) I32, for a layer with attention dropout: one
// bit per score, 1/32 of the (B, H, T, T) F32 probabilities the eager path keeps, but still growing with T².
// The CUDA forward stores its dropout bits there and the backward reads them instead of drawing them again
// (docs/ATTENTION.md). nil without dropout.
func (s *SelfAttention) takeKeepBits(a *Arena, b, t int) *tensor.Tensor {
	if s.Dropout <= 0 {
		return nil
	}
	return a.Take(tensor.I32, b, s.Heads, t, tensor.AttentionKeepBitsLen(1, 1, 1, t))
}

// packable returns the three projections as one LinearStack when they are plain Linears or Adapters (LoRA)
// whose bases have biases alike, which the sdpa path runs into one (B, T, 3C) buffer: one GEMM each for the
// forward, the input gradient and the weight gradients when their parameters lie adjacent
// (ModelCore.SetStacks), else one per projection into strided rows. nil otherwise: another wrapper computes
// its own output and gets a (B, T, C) buffer of its own. The stack is kept while the projections stay (its joined views are what the
// weight-cast cache knows).
func (s *SelfAttention) packable() *LinearStack {
	if !s.stack.Matches(s.Query, s.Key, s.Value) {
		s.stack = NewLinearStack(s.Query, s.Key, s.Value)
	}
	return s.stack
}

// Stack returns the projections' LinearStack of the last layout (nil when they run one by one).
func (s *SelfAttention) Stack() *LinearStack {
	if !s.c.packed {
		return nil
	}
	return s.stack
}

// layout takes this layer's kept buffers for implementation impl; q, k and v are the shared (B, T, C) scratch
// the eager path uses.
func (s *SelfAttention) layout(a *Arena, impl string, b, t int, dt tensor.DType, q, k, v *tensor.Tensor) {
	h, d := s.Heads, s.HeadDim
	n, c := b*t, h*d
	s.c = attentionCache{impl: impl}
	switch {
	case impl == AttnSDPA && s.packable() != nil:
		s.c.packed, s.c.qkv = true, a.Take(dt, n, 3*c)
		s.stack.Layout(a, n, dt)
		s.c.lse = a.Take(tensor.F32, b, h, t)
		s.c.keep = s.takeKeepBits(a, b, t)
	case impl == AttnSDPA:
		s.c.q, s.c.k, s.c.v = a.Take(dt, n, c), a.Take(dt, n, c), a.Take(dt, n, c)
		s.c.lse = a.Take(tensor.F32, b, h, t)
		s.c.keep = s.takeKeepBits(a, b, t)
	default:
		s.c.q, s.c.k, s.c.v = q, k, v
		s.c.qt, s.c.kt, s.c.vt = a.Take(dt, b, h, t, d), a.Take(dt, b, h, t, d), a.Take(dt, b, h, t, d)
		s.c.probs = a.Take(tensor.F32, b, h, t, t)
		if dt != tensor.F32 || s.Dropout > 0 {
			s.c.probsH = a.Take(dt, b, h, t, t)
		}
	}
	if !s.c.packed { // the stack lays out its parts
		s.Query.Layout(a, n, dt)
		s.Key.Layout(a, n, dt)
		s.Value.Layout(a, n, dt)
	}
}

// Parameters lists the projections' parameters as BertSelfAttention names them.
func (s *SelfAttention) Parameters() []NamedParameter {
	var ps []NamedParameter
	for _, m := range []struct {
		name string
		p    Projection
	}{{"query", s.Query}, {"key", s.Key}, {"value", s.Value}} {
		ps = AppendPrefixed(ps, m.name+".", m.p.Parameters())
	}
	return ps
}

// Forward computes out (B, T, C) h, the merged per-head context, from x (B, T, C) h (the layer input in the
// GEMM dtype) and mask (B, T) F32 (0 or MaskedScore per key), with the implementation the pass was laid out
// for. sc is the pass's shared scratch.
func (s *SelfAttention) Forward(p *Pass, sc *attentionScratch, out, x, mask *tensor.Tensor, b, t int) error {
	if s.c.impl == AttnSDPA {
		return s.forwardSDPA(p, out, x, mask, b, t)
	}
	return s.forwardEager(p, sc, out, x, mask, b, t)
}

// Backward takes dout (B, T, C) h, the gradient of Forward's out, and accumulates (+=) the gradient of the
// input into dx (B, T, C) (F32 in the model: the three projections' input gradients meet there in FP32) and the
// projections' weight gradients. x is the forward's input.
func (s *SelfAttention) Backward(p *Pass, sc *attentionScratch, dx, dout, x *tensor.Tensor, b, t int) error {
	if s.c.impl == AttnSDPA {
		return s.backwardSDPA(p, sc, dx, dout, x, b, t)
	}
	return s.backwardEager(p, sc, dx, dout, x, b, t)
}

// qkvRows returns the Q, K and V row blocks of the pass and their row stride: column blocks 0, C, 2C of the
// packed (B·T, 3C) buffer buf (ld 3C), or the three dense (B·T, C) buffers (ld C) when not packed (buf then
// holds them one after another, as the gradient scratch does).
func (s *SelfAttention) qkvRows(buf, q, k, v *tensor.Tensor, n int) (rq, rk, rv *tensor.Tensor, ld int) {
	c := s.Heads * s.HeadDim
	if s.c.packed {
		return viewFrom(buf, 0), viewFrom(buf, c), viewFrom(buf, 2*c), 3 * c
	}
	if q == nil {
		q, k, v = rowsView(buf, 0, n, c), rowsView(buf, n*c, n, c), rowsView(buf, 2*n*c, n, c)
	}
	return q, k, v, c
}

// forwardSDPA is the fused path: the projections into the (B, T, 3C) buffer (the LinearStack) or three
// (B, T, C) buffers, then one Attention call that reads the heads in place and writes out (B, T, C).
func (s *SelfAttention) forwardSDPA(p *Pass, out, x, mask *tensor.Tensor, b, t int) error {
	c, n := &s.c, b*t
	q, k, v, ld := s.qkvRows(c.qkv, c.q, c.k, c.v, n)
	if c.packed {
		if err := s.stack.Forward(p, c.qkv, x); err != nil {
			return err
		}
	} else {
		for _, m := range []struct {
			proj Projection
			rows *tensor.Tensor
		}{{s.Query, q}, {s.Key, k}, {s.Value, v}} {
			if err := m.proj.Forward(p, m.rows, x); err != nil {
				return err
			}
		}
	}
	a := s.args(p, q, k, v, out, ld, mask, b, t)
	c.out, c.mask, c.dropUsed, c.dropOff = out, mask, a.DropoutP > 0, a.Offset
	return p.Backend.Attention(a)
}

// args builds the fused op's arguments for rows of stride ld: the heads of Q, K, V and out read in place, and
// the dropout drawn from the pass's Philox stream exactly as the eager path draws it (one reservation of
// B·H·T·T elements).
func (s *SelfAttention) args(p *Pass, q, k, v, out *tensor.Tensor, ld int, mask *tensor.Tensor, b, t int) tensor.AttentionArgs {
	h, d := s.Heads, s.HeadDim
	a := tensor.AttentionArgs{B: b, Hq: h, Hkv: h, Tq: t, Tk: t, D: d,
		Q: RowHeads(q, t, ld, d), K: RowHeads(k, t, ld, d), V: RowHeads(v, t, ld, d), O: RowHeads(out, t, h*d, d),
		LSE: s.c.lse, Scale: float32(1 / math.Sqrt(float64(d))), Mask: mask}
	if p.DropoutActive(s.Dropout) {
		a.DropoutP, a.Seed, a.Offset, a.KeepBits = s.Dropout, p.Seed, p.DropoutOffset(b*h*t*t), s.c.keep
	}
	return a
}

// backwardSDPA is forwardSDPA's backward: one AttentionBackward call writing dQ, dK, dV into the (B, T, 3C)
// gradient scratch, then the projections' backward from it.
func (s *SelfAttention) backwardSDPA(p *Pass, sc *attentionScratch, dx, dout, x *tensor.Tensor, b, t int) error {
	c, n, ch := &s.c, b*t, s.Heads*s.HeadDim
	q, k, v, ld := s.qkvRows(c.qkv, c.q, c.k, c.v, n)
	dq, dk, dv, _ := s.qkvRows(sc.dqkv, nil, nil, nil, n)
	a := s.args(&Pass{}, q, k, v, c.out, ld, c.mask, b, t) // the forward's arguments, without a new dropout draw
	if c.dropUsed {
		a.DropoutP, a.Seed, a.Offset, a.KeepBits = s.Dropout, p.Seed, c.dropOff, c.keep
	}
	ba := tensor.AttentionBackwardArgs{AttentionArgs: a, DO: RowHeads(dout, t, ch, s.HeadDim),
		DQ: RowHeads(dq, t, ld, s.HeadDim), DK: RowHeads(dk, t, ld, s.HeadDim), DV: RowHeads(dv, t, ld, s.HeadDim)}
	if err := p.Backend.AttentionBackward(ba); err != nil {
		return err
	}
	if c.packed { // the bias gradients are one column sum over the packed gradient
		return s.stack.Backward(p, dx, sc.dqkv, x, true)
	}
	for _, m := range []struct {
		proj Projection
		d    *tensor.Tensor
	}{{s.Query, dq}, {s.Key, dk}, {s.Value, dv}} {
		if err := m.proj.Backward(p, dx, m.d, x, true); err != nil {
			return err
		}
	}
	return nil
}

// RowHeads is the (B, H, T, D) operand of fused attention over rows (B·T, ld) whose first H·D columns hold the
// heads, starting at rows' first element: element (b, h, t, d) is rows[(b·T + t)·ld + h·D + d]. The model
// families' attention layers pass their projections' outputs this way, so no head permute is needed.
func RowHeads(rows *tensor.Tensor, t, ld, d int) tensor.AttnOperand {
	return tensor.AttnOperand{T: rows, StrideB: t * ld, StrideH: d, StrideT: ld}
}

// viewFrom returns the view of t from element off to its end.
func viewFrom(t *tensor.Tensor, off int) *tensor.Tensor { return viewRange(t, off, t.Numel()-off) }

// rowsView returns the (n, c) view of t from element off (the layout guarantees it fits).
func rowsView(t *tensor.Tensor, off, n, c int) *tensor.Tensor {
	v, err := t.View(off, n, c)
	if err != nil {
		panic(err)
	}
	return v
}

// viewRange returns the 1-D view of n elements of t from element off (the layout guarantees it fits).
func viewRange(t *tensor.Tensor, off, n int) *tensor.Tensor {
	v, err := t.View(off, n)
	if err != nil {
		panic(err)
	}
	return v
}

// errUnsupported reports whether err says the backend's fused attention does not cover the call.
func errUnsupported(err error) bool { return errors.Is(err, tensor.ErrUnsupported) }

// forwardEager is the two-pass path ("eager", transformers' eager_attention_forward): the projections, head
// permutes, the (B, H, T, T) scores and probabilities, and the P·V product.
func (s *SelfAttention) forwardEager(p *Pass, sc *attentionScratch, out, x, mask *tensor.Tensor, b, t int) error {
	bk, c := p.Backend, &s.c
	h, d := s.Heads, s.HeadDim
	for _, m := range []struct {
		proj     Projection
		raw, hds *tensor.Tensor
	}{{s.Query, c.q, c.qt}, {s.Key, c.k, c.kt}, {s.Value, c.v, c.vt}} {
		if err := m.proj.Forward(p, m.raw, x); err != nil { // (B, T, C)
			return err
		}
		if err := bk.Transpose12(m.hds, m.raw, b, t, h, d); err != nil { // (B, T, H, D) → (B, H, T, D)
			return err
		}
	}
	// scores (B, H, T, T) F32 = scaling · Q·Kᵀ, one product per (batch, head).
	if err := bk.Gemm(tensor.GemmArgs{
		TransB: true, M: t, N: t, K: d, A: c.qt, B: c.kt, C: sc.scores,
		StrideA: t * d, StrideB: t * d, StrideC: t * t, Batch: b * h,
		Alpha: float32(1 / math.Sqrt(float64(d))),
	}); err != nil {
		return err
	}
	if err := bk.Softmax(c.probs, sc.scores, mask); err != nil { // rows (B, H·T, T), mask (B, T)
		return err
	}
	c.pv, c.dropUsed = c.probs, p.DropoutActive(s.Dropout)
	c.dropOff = 0
	switch {
	case c.dropUsed: // dropout in F32, rounded to h on store: PyTorch drops the FP32 probabilities, then casts
		var err error
		if c.dropOff, err = p.Dropout(c.probsH, c.probs, s.Dropout); err != nil {
			return err
		}
		c.pv = c.probsH
	case c.probsH != nil && c.probsH.DType != tensor.F32:
		if err := bk.Cast(c.probsH, c.probs); err != nil {
			return err
		}
		c.pv = c.probsH
	}
	// ctx (B, H, T, D) h = P·V, then heads merged to (B, T, H, D) = (B, T, C).
	if err := bk.Gemm(tensor.GemmArgs{
		M: t, N: d, K: t, A: c.pv, B: c.vt, C: sc.ctxT,
		StrideA: t * t, StrideB: t * d, StrideC: t * d, Batch: b * h, Alpha: 1,
	}); err != nil {
		return err
	}
	return bk.Transpose12(out, sc.ctxT, b, h, t, d)
}

// backwardEager is forwardEager's backward.
func (s *SelfAttention) backwardEager(p *Pass, sc *attentionScratch, dx, dout, x *tensor.Tensor, b, t int) error {
	bk, c := p.Backend, &s.c
	h, d := s.Heads, s.HeadDim
	dctx := sc.ctxT
	if err := bk.Transpose12(dctx, dout, b, t, h, d); err != nil { // (B, H, T, D) h
		return err
	}
	// dP (B, H, T, T) F32 = dctx·Vᵀ; dV (B, H, T, D) h = Pᵀ·dctx.
	if err := bk.Gemm(tensor.GemmArgs{
		TransB: true, M: t, N: t, K: d, A: dctx, B: c.vt, C: sc.dProbs,
		StrideA: t * d, StrideB: t * d, StrideC: t * t, Batch: b * h, Alpha: 1,
	}); err != nil {
		return err
	}
	if err := bk.Gemm(tensor.GemmArgs{
		TransA: true, M: t, N: d, K: t, A: c.pv, B: dctx, C: sc.dvt,
		StrideA: t * t, StrideB: t * d, StrideC: t * d, Batch: b * h, Alpha: 1,
	}); err != nil {
		return err
	}
	if c.dropUsed {
		if err := bk.DropoutBackward(sc.dProbs, sc.dProbs, s.Dropout, p.Seed, c.dropOff); err != nil {
			return err
		}
	}
	dScores := sc.scores // (B, H, T, T) F32, the forward scores are no longer needed
	if err := bk.SoftmaxBackward(dScores, sc.dProbs, c.probs); err != nil {
		return err
	}
	dsh, err := castOrAlias(bk, sc.scoresH, dScores) // (B, H, T, T) h
	if err != nil {
		return err
	}
	scaling := float32(1 / math.Sqrt(float64(d)))
	// dQ = scaling·dS·K; dK = scaling·dSᵀ·Q, both (B, H, T, D) h.
	if err := bk.Gemm(tensor.GemmArgs{
		M: t, N: d, K: t, A: dsh, B: c.kt, C: sc.dqt,
		StrideA: t * t, StrideB: t * d, StrideC: t * d, Batch: b * h, Alpha: scaling,
	}); err != nil {
		return err
	}
	if err := bk.Gemm(tensor.GemmArgs{
		TransA: true, M: t, N: d, K: t, A: dsh, B: c.qt, C: sc.dkt,
		StrideA: t * t, StrideB: t * d, StrideC: t * d, Batch: b * h, Alpha: scaling,
	}); err != nil {
		return err
	}
	// Back to (B, T, C) and through the projections; the q, k, v scratch now holds their gradients.
	for _, m := range []struct {
		proj      Projection
		hds, flat *tensor.Tensor
	}{{s.Query, sc.dqt, c.q}, {s.Key, sc.dkt, c.k}, {s.Value, sc.dvt, c.v}} {
		if err := bk.Transpose12(m.flat, m.hds, b, h, t, d); err != nil {
			return err
		}
		if err := m.proj.Backward(p, dx, m.flat, x, true); err != nil {
			return err
		}
	}
	return nil
}
