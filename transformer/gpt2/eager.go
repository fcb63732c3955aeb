package gpt2

import (
	"math"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// The eager (two-pass) causal attention: transformers' eager_attention_forward for GPT-2, taken when asked
// for (attn_implementation "eager") or when the backend's fused op does not cover the head size or dtype
// (transformer.AttnChoice). Per batch member b and head h, all read in place from c_attn's (N, 3C) output:
//
//	S = scale·Q·Kᵀ          (T, T) F32, stored in (B, T, H, T) order: row (b, i, h)
//	P = softmax(S + mask)    mask (B·T, T) F32: −Inf above the diagonal (causal), MaskedScore at padding keys
//	ctx = dropout(P)·V       written in (B, T, H, D) = (N, C) order
//
// The (b, i, h) row order lets one Softmax call apply the per-query causal mask: consecutive rows (the H heads
// of one query) share a mask row. S and P are F32 and P is rounded to h only as the input of P·V, as in
// transformer.SelfAttention's eager path. The GEMMs run one per (b, h), since their rows are H·T apart.
// Attention dropout draws from the same Philox reservation as the fused path, over elements in this (b, i, h,
// j) order, so its masks differ from the fused op's (whose elements are ordered (b, h, i, j)).

// eagerCache holds one block's eager-attention activations.
type eagerCache struct {
	probs  *tensor.Tensor // (B, T, H, T) F32 softmax output, kept for the backward
	probsH *tensor.Tensor // (B, T, H, T) h dropout(probs) as P·V reads it; nil when it can alias probs
	pv     *tensor.Tensor // the P·V input of the last Forward (probs or probsH)
}

// eagerScratch is shared by every block's eager attention.
type eagerScratch struct {
	scores *tensor.Tensor // (B, T, H, T) F32 scores; in backward the F32 gradient of the scores
	dProbs *tensor.Tensor // (B, T, H, T) F32 gradient of the probabilities
	dsh    *tensor.Tensor // (B, T, H, T) h the scores' gradient as GEMM input; nil when h is F32
	causal *tensor.Tensor // (B·T, T) F32 causal + padding mask
}

func layoutEagerScratch(a *transformer.Arena, b, t, h int, dt tensor.DType) eagerScratch {
	s := eagerScratch{scores: a.Take(tensor.F32, b*t*h, t), dProbs: a.Take(tensor.F32, b*t*h, t), causal: a.Take(tensor.F32, b*t, t)}
	if dt != tensor.F32 {
		s.dsh = a.Take(dt, b*t*h, t)
	}
	return s
}

func (k *Block) layoutEager(a *transformer.Arena, b, t int, dt tensor.DType) {
	k.e = eagerCache{probs: a.Take(tensor.F32, b*t*k.Heads, t)}
	if dt != tensor.F32 || k.AttnDrop > 0 {
		k.e.probsH = a.Take(dt, b*t*k.Heads, t)
	}
}

// causalMask returns the host values of eagerScratch.causal for a (b, t) batch with attention mask pad (nil:
// no padding): row (b, i), column j is −Inf for j > i, MaskedScore where pad[b, j] is 0, else 0.
func causalMask(b, t int, pad []int32) []float32 {
	m := make([]float32, b*t*t)
	for r := 0; r < b; r++ {
		for i := 0; i < t; i++ {
			row := m[(r*t+i)*t : (r*t+i+1)*t]
			for j := range row {
				switch {
				case j > i:
					row[j] = float32(math.Inf(-1))
				case pad != nil && pad[r*t+j] == 0:
					row[j] = transformer.MaskedScore
				}
			}
		}
	}
	return m
}

// headGemm runs one product per (b, h): C_bh = alpha·op(A_bh)·op(B_bh) + beta·C_bh, each operand given by its
// offset function of (b, h) into its tensor and its row stride.
type headOperand struct {
	t   *tensor.Tensor
	ld  int
	off func(b, h int) int
}

func (k *Block) headGemm(p *transformer.Pass, transA, transB bool, m, n, kk int, a, bm, c headOperand, alpha float32) error {
	for bi := 0; bi < k.c.b; bi++ {
		for h := 0; h < k.Heads; h++ {
			av, _ := a.t.View(a.off(bi, h), a.t.Numel()-a.off(bi, h))
			bv, _ := bm.t.View(bm.off(bi, h), bm.t.Numel()-bm.off(bi, h))
			cv, _ := c.t.View(c.off(bi, h), c.t.Numel()-c.off(bi, h))
			if err := p.Backend.Gemm(tensor.GemmArgs{TransA: transA, TransB: transB, M: m, N: n, K: kk,
				A: av, LDA: a.ld, B: bv, LDB: bm.ld, C: cv, LDC: c.ld, Alpha: alpha, Batch: 1}); err != nil {
				return err
			}
		}
	}
	return nil
}

// part is part i (0 Q, 1 K, 2 V) of a (N, 3C) buffer for head h of batch member b; ctx the (N, C) one; rows
// the (B, T, H, T) score-shaped one.
func (k *Block) part(buf *tensor.Tensor, i int) headOperand {
	c := &k.c
	d := c.c / k.Heads
	return headOperand{buf, 3 * c.c, func(b, h int) int { return b*c.t*3*c.c + i*c.c + h*d }}
}

func (k *Block) ctxOperand(buf *tensor.Tensor) headOperand {
	c := &k.c
	d := c.c / k.Heads
	return headOperand{buf, c.c, func(b, h int) int { return b*c.t*c.c + h*d }}
}

func (k *Block) rowsOperand(buf *tensor.Tensor) headOperand {
	c := &k.c
	return headOperand{buf, k.Heads * c.t, func(b, h int) int { return b*c.t*k.Heads*c.t + h*c.t }}
}

// forwardEager computes c.ctx from c.qkv by the two-pass path.
func (k *Block) forwardEager(p *transformer.Pass, sc *blockScratch) error {
	bk, c, e := p.Backend, &k.c, &k.e
	t, d := c.t, c.c/k.Heads
	if err := k.headGemm(p, false, true, t, t, d, k.part(c.qkv, 0), k.part(c.qkv, 1), k.rowsOperand(sc.eager.scores), k.Scale); err != nil {
		return err
	}
	if err := bk.Softmax(e.probs, sc.eager.scores, sc.eager.causal); err != nil {
		return err
	}
	e.pv = e.probs
	switch {
	case c.attnP > 0:
		if err := bk.Dropout(e.probsH, e.probs, c.attnP, p.Seed, c.attnOff); err != nil {
			return err
		}
		e.pv = e.probsH
	case e.probsH != nil && e.probsH.DType != tensor.F32:
		if err := bk.Cast(e.probsH, e.probs); err != nil {
			return err
		}
		e.pv = e.probsH
	}
	return k.headGemm(p, false, false, t, d, t, k.rowsOperand(e.pv), k.part(c.qkv, 2), k.ctxOperand(c.ctx), 1)
}

// backwardEager writes sc.dqkv (=) from sc.dctx, the gradient of c.ctx.
func (k *Block) backwardEager(p *transformer.Pass, sc *blockScratch) error {
	bk, c, e, s := p.Backend, &k.c, &k.e, &sc.eager
	t, d := c.t, c.c/k.Heads
	dctx := k.ctxOperand(sc.dctx)
	// dP' = dctx·Vᵀ (F32); dV = P'ᵀ·dctx.
	if err := k.headGemm(p, false, true, t, t, d, dctx, k.part(c.qkv, 2), k.rowsOperand(s.dProbs), 1); err != nil {
		return err
	}
	if err := k.headGemm(p, true, false, t, d, t, k.rowsOperand(e.pv), dctx, k.part(sc.dqkv, 2), 1); err != nil {
		return err
	}
	if c.attnP > 0 {
		if err := bk.DropoutBackward(s.dProbs, s.dProbs, c.attnP, p.Seed, c.attnOff); err != nil {
			return err
		}
	}
	dS := s.scores // the forward scores are no longer needed
	if err := bk.SoftmaxBackward(dS, s.dProbs, e.probs); err != nil {
		return err
	}
	if s.dsh != nil {
		if err := bk.Cast(s.dsh, dS); err != nil {
			return err
		}
		dS = s.dsh
	}
	rows := k.rowsOperand(dS)
	if err := k.headGemm(p, false, false, t, d, t, rows, k.part(c.qkv, 1), k.part(sc.dqkv, 0), k.Scale); err != nil {
		return err
	}
	return k.headGemm(p, true, false, t, d, t, rows, k.part(c.qkv, 0), k.part(sc.dqkv, 1), k.Scale)
}
