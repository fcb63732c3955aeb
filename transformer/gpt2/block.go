package gpt2

import (
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// Block is one GPT2Block (transformers/models/gpt2/modeling_gpt2.py), pre-LayerNorm:
//
//	r   = x + dropout(attn.c_proj(attention(attn.c_attn(ln_1(x)))))      attention: causal, fused op
//	out = r + dropout(mlp.c_proj(act(mlp.c_fc(ln_2(r)))))                  act: gelu_new (tanh form)
//
// c_attn maps C → 3C and its output (N, 3C) holds Q, K and V side by side; the fused attention op reads them
// in place through strides (tensor.AttnOperand) and writes the context straight in (B, T, H, D) = (N, C)
// order, so no head transposes are needed (the eager path, eager.go, reads them in place too). Dtypes under autocast (h = F16/BF16): the residual stream x, r,
// out is F32 (the embeddings are F32 and a half branch added to it promotes to F32, as in PyTorch); the
// LayerNorm outputs are written in h (they only feed GEMMs: the same values as an F32 LayerNorm and a cast);
// the projections, attention and the activation are h.
type Block struct {
	Ln1       *transformer.LayerNorm // ln_1
	CAttn     transformer.Projection // attn.c_attn (C → 3C), a Conv1D in transformers
	CProj     transformer.Projection // attn.c_proj (C → C)
	Ln2       *transformer.LayerNorm // ln_2
	CFc       transformer.Projection // mlp.c_fc (C → I)
	MProj     transformer.Projection // mlp.c_proj (I → C)
	Heads     int                    // H
	Scale     float32                // the attention score scale: 1/√D (scale_attn_weights), / (i+1) by layer index
	TanhGELU  bool                   // act is the tanh approximation (gelu_new); false: exact erf GELU
	AttnDrop  float32                // attn_pdrop
	ResidDrop float32                // resid_pdrop

	c    blockCache
	e    eagerCache
	impl string // the attention implementation of this pass: transformer.AttnSDPA or AttnEager
}

// blockCache holds one block's activations for a pass (views of the step arena); N = B·T.
type blockCache struct {
	x              *tensor.Tensor // (N, C) F32 block input, not owned
	ln1            *tensor.Tensor // (N, C) h ln_1(x), the c_attn input
	mean1, rstd1   *tensor.Tensor // (N) F32
	qkv            *tensor.Tensor // (N, 3C) h c_attn output: Q, K, V
	ctx            *tensor.Tensor // (N, C) h attention output, (B, T, H, D) order
	lse            *tensor.Tensor // (B, H, T) F32 log-sum-exp of each score row
	r              *tensor.Tensor // (N, C) F32 x + attention branch, the ln_2 input
	ln2            *tensor.Tensor // (N, C) h ln_2(r)
	mean2, rstd2   *tensor.Tensor // (N) F32
	u              *tensor.Tensor // (N, I) h c_fc output, the activation input
	g              *tensor.Tensor // (N, I) h act(u), the mlp.c_proj input
	out            *tensor.Tensor // (N, C) F32 block output
	attnOff        uint64         // Philox offset of the attention-probability dropout
	drop1, drop2   uint64         // Philox offsets of the two residual dropouts
	attnP          float32        // the attention dropout probability used (0 when inactive)
	used1, used2   bool           // whether the residual dropouts drew masks
	b, t, c, inter int
}

// blockScratch is shared by every block of one pass.
type blockScratch struct {
	y     *tensor.Tensor // (N, C) h the projections' outputs before the residual add; in backward their gradient
	dqkv  *tensor.Tensor // (N, 3C) h gradient of c_attn's output
	dctx  *tensor.Tensor // (N, C) h gradient of the attention output
	dg    *tensor.Tensor // (N, I) h gradient of the activation output, then of its input (in place)
	dln   *tensor.Tensor // (N, C) F32 gradient of a LayerNorm output (a projection's input gradient)
	dres  *tensor.Tensor // (N, C) F32 gradient of a LayerNorm input, added to the residual gradient
	mask  *tensor.Tensor // (B, T) F32 key mask (0 or transformer.MaskedScore), or nil without padding
	segs  *tensor.Tensor // (B, T) I32 segment ids of packed rows, or nil
	eager eagerScratch   // the two-pass path's buffers (eager.go); zero on the fused path
}

func layoutScratch(a *transformer.Arena, b, t, c, inter int, dt tensor.DType) blockScratch {
	n := b * t
	return blockScratch{
		y: a.Take(dt, n, c), dqkv: a.Take(dt, n, 3*c), dctx: a.Take(dt, n, c), dg: a.Take(dt, n, inter),
		dln: a.Take(tensor.F32, n, c), dres: a.Take(tensor.F32, n, c),
	}
}

// layout takes the block's kept buffers for a (b, t) pass in GEMM dtype dt with attention implementation
// impl. With out set (gradient checkpointing) the block writes its output there, a buffer kept outside the
// region the blocks share.
func (k *Block) layout(a *transformer.Arena, out *tensor.Tensor, impl string, b, t int, dt tensor.DType) {
	n, c, inter := b*t, k.Ln1.C, k.CFc.Base().Out
	k.impl, k.e = impl, eagerCache{}
	if impl == transformer.AttnEager {
		k.layoutEager(a, b, t, dt)
	}
	k.c = blockCache{
		ln1: a.Take(dt, n, c), mean1: a.Take(tensor.F32, n), rstd1: a.Take(tensor.F32, n),
		qkv: a.Take(dt, n, 3*c), ctx: a.Take(dt, n, c), lse: a.Take(tensor.F32, b, k.Heads, t),
		r: a.Take(tensor.F32, n, c), ln2: a.Take(dt, n, c), mean2: a.Take(tensor.F32, n), rstd2: a.Take(tensor.F32, n),
		u: a.Take(dt, n, inter), g: a.Take(dt, n, inter), out: out,
		b: b, t: t, c: c, inter: inter,
	}
	if out == nil {
		k.c.out = a.Take(tensor.F32, n, c)
	}
	for _, p := range []transformer.Projection{k.CAttn, k.CProj, k.CFc, k.MProj} {
		p.Layout(a, n, dt)
	}
}

// Parameters lists the block's parameters as GPT2Block names them.
func (k *Block) Parameters() []transformer.NamedParameter {
	var ps []transformer.NamedParameter
	ps = transformer.AppendPrefixed(ps, "ln_1.", k.Ln1.Parameters())
	ps = transformer.AppendPrefixed(ps, "attn.c_attn.", k.CAttn.Parameters())
	ps = transformer.AppendPrefixed(ps, "attn.c_proj.", k.CProj.Parameters())
	ps = transformer.AppendPrefixed(ps, "ln_2.", k.Ln2.Parameters())
	ps = transformer.AppendPrefixed(ps, "mlp.c_fc.", k.CFc.Parameters())
	ps = transformer.AppendPrefixed(ps, "mlp.c_proj.", k.MProj.Parameters())
	return ps
}

// attention returns the fused-attention arguments of this block's pass: Q, K and V read in place from the
// (B, T, 3, H, D) c_attn output and O written in (B, T, H, D) order.
func (k *Block) attention(p *transformer.Pass, sc *blockScratch) tensor.AttentionArgs {
	c := &k.c
	return tensor.AttentionArgs{
		B: c.b, Hq: k.Heads, Hkv: k.Heads, Tq: c.t, Tk: c.t, D: c.c / k.Heads,
		Q: k.operand(c.qkv, 0), K: k.operand(c.qkv, 1), V: k.operand(c.qkv, 2), O: k.operand(c.ctx, 0),
		LSE: c.lse, Scale: k.Scale, Mask: sc.mask, Causal: true, Segments: sc.segs,
		DropoutP: c.attnP, Seed: p.Seed, Offset: c.attnOff,
	}
}

// operand views part i (0, 1, 2 for Q, K, V) of buf, an (N, W) buffer with W = C (the context) or 3C (the
// c_attn output), as a (B, H, T, D) attention operand: element (b, h, t, d) at b·T·W + t·W + i·C + h·D + d.
func (k *Block) operand(buf *tensor.Tensor, i int) tensor.AttnOperand {
	c := &k.c
	w := buf.Numel() / (c.b * c.t)
	v, _ := buf.View(i*c.c, buf.Numel()-i*c.c)
	return tensor.AttnOperand{T: v, StrideB: c.t * w, StrideH: c.c / k.Heads, StrideT: w}
}

// blockKV is a decode pass's view of one block's key/value cache (transformer.KVCache), rows of C = (H, D).
type blockKV struct {
	k, v       *tensor.Tensor // (n, C) h: cache rows [start, start+n), the new tokens'
	kAll, vAll *tensor.Tensor // (start+n, C) h: cache rows [0, start+n)
}

// Forward runs the block on x (N, C) F32 and returns its output (N, C) F32, a view of the step arena. x must
// stay unchanged until Backward.
func (k *Block) Forward(p *transformer.Pass, sc *blockScratch, x *tensor.Tensor) (*tensor.Tensor, error) {
	return k.forward(p, sc, x, nil)
}

// forward is Forward; with kv (a decode pass, B = 1, fused attention) the keys and values of c_attn's output
// are copied into the cache rows and the T new queries attend to all start+T cached positions (causal,
// bottom-right aligned).
func (k *Block) forward(p *transformer.Pass, sc *blockScratch, x *tensor.Tensor, kv *blockKV) (*tensor.Tensor, error) {
	bk, c := p.Backend, &k.c
	c.x = x
	if err := k.Ln1.Forward(p, c.ln1, c.mean1, c.rstd1, x); err != nil {
		return nil, err
	}
	if err := k.CAttn.Forward(p, c.qkv, c.ln1); err != nil {
		return nil, err
	}
	c.attnP = 0
	if p.DropoutActive(k.AttnDrop) {
		c.attnP = k.AttnDrop
		c.attnOff = p.DropoutOffset(c.b * k.Heads * c.t * c.t)
	}
	if kv != nil {
		if err := k.attendCached(p, sc, kv); err != nil {
			return nil, err
		}
	} else if k.impl == transformer.AttnEager {
		if err := k.forwardEager(p, sc); err != nil {
			return nil, err
		}
	} else if err := bk.Attention(k.attention(p, sc)); err != nil {
		return nil, err
	}
	if err := k.CProj.Forward(p, sc.y, c.ctx); err != nil {
		return nil, err
	}
	if err := k.residual(p, c.r, x, sc.y, &c.used1, &c.drop1); err != nil {
		return nil, err
	}
	if err := k.Ln2.Forward(p, c.ln2, c.mean2, c.rstd2, c.r); err != nil {
		return nil, err
	}
	if err := k.CFc.Forward(p, c.u, c.ln2); err != nil {
		return nil, err
	}
	act := bk.GELU
	if k.TanhGELU {
		act = bk.GELUTanh
	}
	if err := act(c.g, c.u); err != nil {
		return nil, err
	}
	if err := k.MProj.Forward(p, sc.y, c.g); err != nil {
		return nil, err
	}
	return c.out, k.residual(p, c.out, c.r, sc.y, &c.used2, &c.drop2)
}

// attendCached is the decode pass's attention: c_attn's (T, 3, C) output is split into (3, T, C) blocks in
// the dqkv scratch (one Transpose12), K and V are copied into the cache rows, and the fused op runs the T
// queries over the cache.
func (k *Block) attendCached(p *transformer.Pass, sc *blockScratch, kv *blockKV) error {
	bk, c := p.Backend, &k.c
	n, ch := c.t, c.c
	if err := bk.Transpose12(sc.dqkv, c.qkv, 1, n, 3, ch); err != nil { // (1, T, 3, C) → (1, 3, T, C)
		return err
	}
	split := func(i int) *tensor.Tensor {
		v, err := sc.dqkv.View(i*n*ch, n, ch)
		if err != nil {
			panic(err)
		}
		return v
	}
	if err := bk.Copy(kv.k, split(1)); err != nil {
		return err
	}
	if err := bk.Copy(kv.v, split(2)); err != nil {
		return err
	}
	d, tk := ch/k.Heads, kv.kAll.Numel()/ch
	return bk.Attention(tensor.AttentionArgs{
		B: 1, Hq: k.Heads, Hkv: k.Heads, Tq: n, Tk: tk, D: d,
		Q: transformer.RowHeads(split(0), n, ch, d), K: transformer.RowHeads(kv.kAll, tk, ch, d),
		V: transformer.RowHeads(kv.vAll, tk, ch, d), O: k.operand(c.ctx, 0),
		LSE: c.lse, Scale: k.Scale, Causal: true,
	})
}

// residual sets out (N, C) F32 = x + dropout(y), y the branch output in h (dropped in place).
func (k *Block) residual(p *transformer.Pass, out, x, y *tensor.Tensor, used *bool, off *uint64) error {
	if *used = p.DropoutActive(k.ResidDrop); *used {
		var err error
		if *off, err = p.Dropout(y, y, k.ResidDrop); err != nil {
			return err
		}
	}
	return p.Backend.Add(out, y, x)
}

// Backward takes in grad (N, C) F32 the gradient of the block output and leaves there the gradient of the
// block input. Parameter gradients accumulate (+=).
func (k *Block) Backward(p *transformer.Pass, sc *blockScratch, grad *tensor.Tensor) error {
	bk, c := p.Backend, &k.c
	// MLP branch: grad is also the residual's gradient, so d(r) = grad + ln_2's backward of the branch.
	dy, err := k.branchGrad(p, sc.y, grad, c.used2, c.drop2)
	if err != nil {
		return err
	}
	if err := k.MProj.Backward(p, sc.dg, dy, c.g, false); err != nil {
		return err
	}
	actBack := bk.GELUBackward
	if k.TanhGELU {
		actBack = bk.GELUTanhBackward
	}
	if err := actBack(sc.dg, sc.dg, c.u); err != nil {
		return err
	}
	if err := k.CFc.Backward(p, sc.dln, sc.dg, c.ln2, false); err != nil {
		return err
	}
	if err := k.Ln2.Backward(p, sc.dres, sc.dln, c.r, c.mean2, c.rstd2); err != nil {
		return err
	}
	if err := bk.Add(grad, grad, sc.dres); err != nil { // d(r)
		return err
	}
	// Attention branch, the same way down to d(x).
	if dy, err = k.branchGrad(p, sc.y, grad, c.used1, c.drop1); err != nil {
		return err
	}
	if err := k.CProj.Backward(p, sc.dctx, dy, c.ctx, false); err != nil {
		return err
	}
	if k.impl == transformer.AttnEager {
		if err := k.backwardEager(p, sc); err != nil {
			return err
		}
	} else if err := bk.AttentionBackward(tensor.AttentionBackwardArgs{AttentionArgs: k.attention(p, sc),
		DO: k.operand(sc.dctx, 0), DQ: k.operand(sc.dqkv, 0), DK: k.operand(sc.dqkv, 1), DV: k.operand(sc.dqkv, 2),
	}); err != nil {
		return err
	}
	if err := k.CAttn.Backward(p, sc.dln, sc.dqkv, c.ln1, false); err != nil {
		return err
	}
	if err := k.Ln1.Backward(p, sc.dres, sc.dln, c.x, c.mean1, c.rstd1); err != nil {
		return err
	}
	return bk.Add(grad, grad, sc.dres) // d(x)
}

// branchGrad returns the gradient reaching a projection output through its residual dropout: dres (N, C)
// F32 passed back through the dropout and rounded to the GEMM dtype into dst, or dres itself when neither
// applies (FP32, no dropout).
func (k *Block) branchGrad(p *transformer.Pass, dst, dres *tensor.Tensor, used bool, off uint64) (*tensor.Tensor, error) {
	switch {
	case used:
		return dst, p.Backend.DropoutBackward(dst, dres, k.ResidDrop, p.Seed, off)
	case dst.DType != dres.DType:
		return dst, p.Backend.Cast(dst, dres)
	}
	return dres, nil
}
