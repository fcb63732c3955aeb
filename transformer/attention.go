package transformer

import (
	"math"

	"github.com/tune-ml/tune/tensor"
)

// MaskedScore is the additive attention-mask value of a padding key: torch.finfo(float32).min, as transformers
// builds the eager mask (masking_utils, FACTS §4.4); 0 is added for an attended key. Using the finite minimum
// rather than -Inf mirrors transformers exactly, including the corner case of a sequence that is all padding,
// whose rows then attend uniformly instead of giving zeros.
const MaskedScore = -math.MaxFloat32

// SelfAttention is BertSelfAttention: per head (D = C/H, scaling = D^−½)
//
//	scores = Q·Kᵀ·scaling + mask,  P = softmax(scores),  ctx = dropout(P)·V,  heads merged back to (B, T, C).
//
// Numerics (../shared/DESIGN.md): the three projections and both attention products are GEMM-class (GEMM dtype
// h: F32, or F16/BF16 under autocast). The scores GEMM writes F32 (FP32 accumulation, scaling applied in FP32 as
// its alpha), the mask add and softmax are FP32, dropout runs on the F32 probabilities, and they are rounded to h
// only as the input of P·V. PyTorch eager instead rounds the QKᵀ product to half before its FP32 softmax; the
// difference is within half precision of the scores.
type SelfAttention struct {
	Query, Key, Value Projection // (C → C) each
	Heads, HeadDim    int        // H and D = C/H
	Dropout           float32    // attention_probs_dropout_prob

	c attentionCache
}

// attentionCache holds one pass's activations; h is the pass's GEMM dtype.
type attentionCache struct {
	q, k, v    *tensor.Tensor // (B, T, C) h projections, scratch shared by every layer
	qt, kt, vt *tensor.Tensor // (B, H, T, D) h heads split, kept for backward
	probs      *tensor.Tensor // (B, H, T, T) F32 softmax output, kept for the softmax backward
	probsH     *tensor.Tensor // (B, H, T, T) h dropout(probs) as P·V reads it; nil when it can alias probs
	pv         *tensor.Tensor // (B, H, T, T) the P·V input of the last Forward (probs or probsH)
	dropOff    uint64
	dropUsed   bool
}

// attentionScratch is shared by every layer of one pass (forward and backward use it in turn).
type attentionScratch struct {
	scores   *tensor.Tensor // (B, H, T, T) F32 QKᵀ·scaling; in backward the F32 gradient of the scores
	scoresH  *tensor.Tensor // (B, H, T, T) h the scores gradient as GEMM input; nil when h is F32
	dProbs   *tensor.Tensor // (B, H, T, T) F32 gradient of the probabilities
	ctxT     *tensor.Tensor // (B, H, T, D) h per-head context; in backward its gradient
	dqt, dkt *tensor.Tensor // (B, H, T, D) h
	dvt      *tensor.Tensor // (B, H, T, D) h
}

// layoutAttentionScratch takes the buffers shared by every layer's attention for a (B, T) pass with C = H·D.
func layoutAttentionScratch(a *Arena, b, t, h, d int, dt tensor.DType) attentionScratch {
	return attentionScratch{
		scores: a.Take(tensor.F32, b, h, t, t), scoresH: takeIfCast(a, dt, tensor.F32, b, h, t, t),
		dProbs: a.Take(tensor.F32, b, h, t, t), ctxT: a.Take(dt, b, h, t, d),
		dqt: a.Take(dt, b, h, t, d), dkt: a.Take(dt, b, h, t, d), dvt: a.Take(dt, b, h, t, d),
	}
}

// layout takes this layer's kept buffers; q, k and v are the shared (B, T, C) scratch.
func (s *SelfAttention) layout(a *Arena, b, t int, dt tensor.DType, q, k, v *tensor.Tensor) {
	h, d := s.Heads, s.HeadDim
	s.c = attentionCache{
		q: q, k: k, v: v,
		qt: a.Take(dt, b, h, t, d), kt: a.Take(dt, b, h, t, d), vt: a.Take(dt, b, h, t, d),
		probs: a.Take(tensor.F32, b, h, t, t),
	}
	if dt != tensor.F32 || s.Dropout > 0 {
		s.c.probsH = a.Take(dt, b, h, t, t)
	}
	s.Query.Layout(a, b*t, dt)
	s.Key.Layout(a, b*t, dt)
	s.Value.Layout(a, b*t, dt)
}

// Parameters lists the projections' parameters as BertSelfAttention names them.
func (s *SelfAttention) Parameters() []NamedParameter {
	var ps []NamedParameter
	for _, m := range []struct {
		name string
		p    Projection
	}{{"query", s.Query}, {"key", s.Key}, {"value", s.Value}} {
		for _, np := range m.p.Parameters() {
			ps = append(ps, NamedParameter{Name: m.name + "." + np.Name, Param: np.Param})
		}
	}
	return ps
}

// Forward computes out (B, T, C) h, the merged per-head context, from x (B, T, C) h (the layer input in the
// GEMM dtype) and mask (B, T) F32 (0 or MaskedScore per key). sc is the pass's shared scratch.
func (s *SelfAttention) Forward(p *Pass, sc *attentionScratch, out, x, mask *tensor.Tensor, b, t int) error {
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

// Backward takes dout (B, T, C) h, the gradient of Forward's out, and accumulates (+=) the gradient of the
// input into dx (B, T, C) (F32 in the model: the three projections' input gradients meet there in FP32) and the
// projections' weight gradients. x is the forward's input.
func (s *SelfAttention) Backward(p *Pass, sc *attentionScratch, dx, dout, x *tensor.Tensor, b, t int) error {
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
