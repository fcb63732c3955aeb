package transformer

import (
	"errors"

	"github.com/tune-ml/tune/tensor"
)

// Layer is one BertLayer, post-LayerNorm (transformers/models/bert/modeling_bert.py):
//
//	a   = LayerNorm(dropout(dense_o(SelfAttention(x))) + x)     attention.output
//	out = LayerNorm(dropout(dense_2(GELU(dense_1(a)))) + a)      intermediate, output
//
// Dtypes under autocast (h = F16/BF16; aten/src/ATen/autocast_mode.cpp): x and a are F32 (LayerNorm outputs) and are cast to h once
// as GEMM inputs; projections, GELU and dropout give h; the residual adds of h and F32 give F32; LayerNorm is F32.
// Under FP32 every h is F32 and the casts disappear (the buffers alias).
type Layer struct {
	Attention     SelfAttention // attention.self: Q, K, V and the scaled dot-product attention
	AttnOut       Projection    // attention.output.dense (C → C)
	AttnNorm      *LayerNorm    // attention.output.LayerNorm
	Intermediate  Projection    // intermediate.dense (C → I)
	Output        Projection    // output.dense (I → C)
	OutNorm       *LayerNorm    // output.LayerNorm
	HiddenDropout float32       // hidden_dropout_prob

	c layerCache
}

// layerCache holds one layer's activations for a pass (views of the step arena); N = B·T.
type layerCache struct {
	x         *tensor.Tensor // (N, C) F32 layer input (the previous layer's out), not owned
	xh        *tensor.Tensor // (N, C) h input cast for the projections; nil under FP32 (x is used)
	ctx       *tensor.Tensor // (N, C) h merged attention context, attention.output.dense input
	r1        *tensor.Tensor // (N, C) F32 dropout(dense_o(ctx)) + x, the LayerNorm input
	mean1     *tensor.Tensor // (N) F32
	rstd1     *tensor.Tensor // (N) F32
	a         *tensor.Tensor // (N, C) F32 attention block output; shared scratch under autocast (ah is kept)
	ah        *tensor.Tensor // (N, C) h a cast for intermediate.dense; nil under FP32
	u         *tensor.Tensor // (N, I) h intermediate.dense output, the GELU input; shared scratch when recomputed
	uShared   bool           // u is not kept: backward recomputes it from aIn into the scratch g (keepPlan)
	r2        *tensor.Tensor // (N, C) F32 dropout(dense_2(g)) + a
	mean2     *tensor.Tensor // (N) F32
	rstd2     *tensor.Tensor // (N) F32
	out       *tensor.Tensor // (N, C) F32 layer output; under autocast one of two buffers the layers alternate
	drop1Off  uint64
	drop2Off  uint64
	drop1Used bool
	drop2Used bool
	xIn, aIn  *tensor.Tensor // the GEMM inputs of the last forward (xh or x, ah or a)
	nextXh    *tensor.Tensor // the next layer's xh, which OutNorm writes (LayoutLayers without checkpointing)
	xhByPrev  bool           // xh is written by the previous layer's OutNorm: Forward does not cast x
	mask      *tensor.Tensor // the last forward's (B, T) attention mask, for Recompute
	startOff  uint64         // the Philox offset the last forward started at, for Recompute
}

// layerScratch is shared by every layer of a pass.
type layerScratch struct {
	attn    attentionScratch
	q, k, v *tensor.Tensor    // (N, C) h projections (eager attention's scratch; nil under sdpa)
	y       *tensor.Tensor    // (N, C) h dense outputs before the residual; in backward their gradients
	g       *tensor.Tensor    // (N, I) h GELU output, output.dense's input; recomputed from u in backward
	dg      *tensor.Tensor    // (N, I) h gradient of the GELU output, then of its input (in place)
	dctx    *tensor.Tensor    // (N, C) h gradient of the attention context
	a       *tensor.Tensor    // (N, C) F32 attention block output under autocast (backward reads only ah)
	outs    [2]*tensor.Tensor // (N, C) F32 layer outputs under autocast, alternating: the next layer reads
	// one as its input while writing the other, and backward reads only the half copy xh
	turn int // the next layer's index into outs during layout
	// xh and ah are the (N, C) half GEMM inputs of the layers whose backward does not read them (keepPlan),
	// a32 the (N, C) F32 block output a of such layers under FP32; each nil until a layer needs it.
	xh, ah, a32 *tensor.Tensor
}

// ffnRecomputeBytes is the size of a layer's (N, I) pre-activation u from which a frozen feed-forward block
// keeps its input instead (keepPlan): a quarter of the bytes, for one more intermediate.dense GEMM in backward.
// Below it (BERT-base at 32×128: 24 MiB a layer) the GEMM's cost outweighs the memory.
var ffnRecomputeBytes int64 = 64 << 20

// keepAll makes every layer keep all its inputs and u (the layout before keepPlan), for the tests that compare
// the two layouts bit for bit.
var keepAll bool

// keepPlan is what a layer keeps for its backward beyond what every layer keeps: its half input xh (read by
// the Q/K/V weight gradients and adapters), its block output a (intermediate.dense's input), and u.
type keepPlan struct {
	x, a bool // keep xh (the F32 x under FP32 is the previous layer's output) and ah (a under FP32)
	// recomputeU: the feed-forward block is frozen (both dense layers plain Linears without a trainable
	// weight: no one reads g, so the scratch g is free in backward) and u is at least ffnRecomputeBytes, so the
	// layer keeps a (ah) instead of u and backward recomputes u = intermediate.dense(a) — the same GEMM on the
	// same operands, so the same bits.
	recomputeU bool
}

// readsInput reports whether p's Backward reads the forward's input: a plain Linear only for its weight
// gradient, any other projection (a LoRA wrapper: its adapter's gradients) always.
func readsInput(p Projection) bool {
	if l, ok := p.(*Linear); ok {
		return l.Weight.Grad != nil
	}
	return true
}

// keepPlan returns what the layer keeps for an n-row pass in GEMM dtype dt, from its projections' current
// trainability (a re-pack after SetTrainable or ReplaceProjections re-carves the arena).
func (l *Layer) keepPlan(n int, dt tensor.DType) keepPlan {
	if keepAll {
		return keepPlan{x: true, a: true}
	}
	at := l.Attention
	k := keepPlan{x: readsInput(at.Query) || readsInput(at.Key) || readsInput(at.Value), a: readsInput(l.Intermediate)}
	inter, ok1 := l.Intermediate.(*Linear)
	out, ok2 := l.Output.(*Linear)
	k.recomputeU = ok1 && ok2 && inter.Weight.Grad == nil && out.Weight.Grad == nil &&
		int64(n)*int64(inter.Out)*int64(dt.Size()) >= ffnRecomputeBytes
	k.a = k.a || k.recomputeU
	return k
}

// shared returns *t, taking an (n, c) buffer of dt into it first when it is nil.
func shared(a *Arena, t **tensor.Tensor, dt tensor.DType, n, c int) *tensor.Tensor {
	if *t == nil {
		*t = a.Take(dt, n, c)
	}
	return *t
}

func layoutLayerScratch(a *Arena, impl string, b, t, c, inter, heads int, dt tensor.DType) layerScratch {
	n := b * t
	sc := layerScratch{
		attn: layoutAttentionScratch(a, impl, b, t, heads, c/heads, dt),
		y:    a.Take(dt, n, c), g: a.Take(dt, n, inter), dg: a.Take(dt, n, inter), dctx: a.Take(dt, n, c),
	}
	if dt != tensor.F32 {
		sc.a, sc.outs = a.Take(tensor.F32, n, c), [2]*tensor.Tensor{a.Take(tensor.F32, n, c), a.Take(tensor.F32, n, c)}
	}
	if impl != AttnSDPA { // the eager path's projections are scratch (its kept heads are permuted copies)
		sc.q, sc.k, sc.v = a.Take(dt, n, c), a.Take(dt, n, c), a.Take(dt, n, c)
	}
	return sc
}

// layout takes this layer's kept buffers for a (B, T) pass with attention implementation impl. Layers are
// laid out in order (the alternating outputs under autocast follow that order).
//
// What backward reads is kept per layer; the rest is shared: the GELU output g is recomputed from u before
// output.dense's backward (one elementwise pass instead of an (N, I) buffer per layer), and under autocast the
// F32 block output a and layer output are not read by backward (the GEMMs' half copies ah and the next layer's
// xh are), so every layer writes a into one scratch and the outputs alternate between two buffers. A GEMM
// input whose weight gradient no one computes (a frozen projection, as with LoRA) is shared scratch too, and
// a large frozen feed-forward block keeps its input instead of u (keepPlan).
//
// With out set (gradient checkpointing, LayoutLayers) the layer writes its output there instead, a buffer of
// its own that the next layer reads as input and Recompute starts from.
func (l *Layer) layout(a *Arena, sc *layerScratch, out *tensor.Tensor, impl string, b, t int, dt tensor.DType) {
	n, c, inter := b*t, l.AttnNorm.C, l.Intermediate.Base().Out
	k := l.keepPlan(n, dt)
	l.c = layerCache{
		ctx: a.Take(dt, n, c),
		r1:  a.Take(tensor.F32, n, c), mean1: a.Take(tensor.F32, n), rstd1: a.Take(tensor.F32, n),
		a:  sc.a,
		r2: a.Take(tensor.F32, n, c), mean2: a.Take(tensor.F32, n), rstd2: a.Take(tensor.F32, n),
		out: sc.outs[sc.turn%2], uShared: k.recomputeU,
	}
	sc.turn++
	if dt != tensor.F32 {
		if k.x {
			l.c.xh = a.Take(dt, n, c)
		} else {
			l.c.xh = shared(a, &sc.xh, dt, n, c)
		}
		if k.a {
			l.c.ah = a.Take(dt, n, c)
		} else {
			l.c.ah = shared(a, &sc.ah, dt, n, c)
		}
	}
	if l.c.u = sc.dg; !k.recomputeU { // recomputed: the forward's u lives in dg, which backward fills later
		l.c.u = a.Take(dt, n, inter)
	}
	if dt == tensor.F32 { // the GEMMs read a and the layer output themselves: keep them
		if k.a {
			l.c.a = a.Take(tensor.F32, n, c)
		} else {
			l.c.a = shared(a, &sc.a32, tensor.F32, n, c)
		}
		if out == nil {
			l.c.out = a.Take(tensor.F32, n, c)
		}
	}
	if out != nil {
		l.c.out = out
	}
	l.Attention.layout(a, impl, b, t, dt, sc.q, sc.k, sc.v)
	l.AttnOut.Layout(a, n, dt)
	l.Intermediate.Layout(a, n, dt)
	l.Output.Layout(a, n, dt)
}

// Parameters lists the layer's parameters as BertLayer names them.
func (l *Layer) Parameters() []NamedParameter {
	var ps []NamedParameter
	ps = AppendPrefixed(ps, "attention.self.", l.Attention.Parameters())
	ps = AppendPrefixed(ps, "attention.output.dense.", l.AttnOut.Parameters())
	ps = AppendPrefixed(ps, "attention.output.LayerNorm.", l.AttnNorm.Parameters())
	ps = AppendPrefixed(ps, "intermediate.dense.", l.Intermediate.Parameters())
	ps = AppendPrefixed(ps, "output.dense.", l.Output.Parameters())
	ps = AppendPrefixed(ps, "output.LayerNorm.", l.OutNorm.Parameters())
	return ps
}

// Forward runs the layer on x (N, C) F32 with mask (B, T) F32 and returns its output (N, C) F32, a view of
// the step arena. x must stay unchanged until Backward.
func (l *Layer) Forward(p *Pass, sc *layerScratch, x, mask *tensor.Tensor, b, t int) (*tensor.Tensor, error) {
	bk, c := p.Backend, &l.c
	c.x, c.mask, c.startOff = x, mask, p.Offset
	var err error
	if c.xhByPrev {
		c.xIn = c.xh
	} else if c.xIn, err = castOrAlias(bk, c.xh, c.x); err != nil {
		return nil, err
	}
	if err := l.Attention.Forward(p, &sc.attn, c.ctx, c.xIn, mask, b, t); err != nil {
		return nil, err
	}
	// attention.output: r1 = dropout(dense(ctx)) + x; a = LayerNorm(r1).
	if err := l.AttnOut.Forward(p, sc.y, c.ctx); err != nil {
		return nil, err
	}
	// One ResidualLayerNorm does the dropout, the add, the LayerNorm and the cast of a for intermediate.dense.
	var prob float32
	if c.drop1Used = p.DropoutActive(l.HiddenDropout); c.drop1Used {
		prob, c.drop1Off = l.HiddenDropout, p.DropoutOffset(sc.y.Numel())
	}
	if err := l.AttnNorm.ForwardResidual(p, c.a, c.ah, c.mean1, c.rstd1, c.r1, sc.y, c.x, prob, c.drop1Off); err != nil {
		return nil, err
	}
	// intermediate and output: r2 = dropout(dense_2(GELU(dense_1(a)))) + a; out = LayerNorm(r2).
	if c.aIn = c.a; c.ah != nil {
		c.aIn = c.ah
	}
	if err := l.Intermediate.Forward(p, c.u, c.aIn); err != nil {
		return nil, err
	}
	if err := bk.GELU(sc.g, c.u); err != nil {
		return nil, err
	}
	if err := l.Output.Forward(p, sc.y, sc.g); err != nil {
		return nil, err
	}
	prob = 0
	if c.drop2Used = p.DropoutActive(l.HiddenDropout); c.drop2Used {
		prob, c.drop2Off = l.HiddenDropout, p.DropoutOffset(sc.y.Numel())
	}
	return c.out, l.OutNorm.ForwardResidual(p, c.out, c.nextXh, c.mean2, c.rstd2, c.r2, sc.y, c.a, prob, c.drop2Off)
}

// Recompute runs the layer's last Forward again from its input, which must be unchanged, with the same mask
// and the same Philox offsets (so every dropout mask is redrawn identically) and without observing: it
// refills the layer's activations bit for bit, for a Backward after other layers overwrote them (gradient
// checkpointing, LayoutLayers). p is the pass of that Forward.
func (l *Layer) Recompute(p *Pass, sc *layerScratch, b, t int) error {
	q := *p
	q.Offset, q.Observe = l.c.startOff, nil
	_, err := l.Forward(&q, sc, l.c.x, l.c.mask, b, t)
	return err
}

// LayoutLayers takes the kept buffers of layers, in order, for a (b, t) pass in GEMM dtype dt with attention
// implementation impl. Without checkpoint every layer keeps what its Backward reads. With checkpoint
// (transformers' gradient_checkpointing) each layer keeps only its output, the next layer's input, and the
// layers' internal activations share one region of the arena (Arena.Overlay): after the forward only the last
// layer's are intact, so the caller runs Recompute on every other layer just before its Backward. The results
// are the same bit for bit; the arena holds one layer's activations instead of len(layers).
//
// Without checkpoint and under autocast, each layer's output LayerNorm also writes the next layer's half
// input copy (ResidualLayerNorm's OutHalf: the bits of the Cast it replaces), so within a pass the layers'
// Forwards must run in order, each on the previous one's output, as an encoder runs them.
func LayoutLayers(a *Arena, sc *LayerScratch, layers []*Layer, checkpoint bool, impl string, b, t int, dt tensor.DType) {
	for _, l := range layers { // the shared inputs of layers that do not keep theirs, outside any overlay
		n, c, k := b*t, l.AttnNorm.C, l.keepPlan(b*t, dt)
		if dt == tensor.F32 && !k.a {
			shared(a, &sc.a32, dt, n, c)
		}
		if dt != tensor.F32 && !k.x {
			shared(a, &sc.xh, dt, n, c)
		}
		if dt != tensor.F32 && !k.a {
			shared(a, &sc.ah, dt, n, c)
		}
	}
	if !checkpoint {
		for _, l := range layers {
			l.layout(a, sc, nil, impl, b, t, dt)
		}
		for i := 0; i+1 < len(layers); i++ {
			if nx := layers[i+1].c.xh; nx != nil {
				layers[i].c.nextXh, layers[i+1].c.xhByPrev = nx, true
			}
		}
		return
	}
	outs := make([]*tensor.Tensor, len(layers))
	for i, l := range layers {
		if i < len(sc.outs) && sc.outs[i] != nil { // the two alternating outputs of autocast are free: reuse them
			outs[i] = sc.outs[i]
			continue
		}
		outs[i] = a.Take(tensor.F32, b*t, l.AttnNorm.C)
	}
	a.Overlay(len(layers), func(i int) { layers[i].layout(a, sc, outs[i], impl, b, t, dt) })
}

// Backward takes in grad (N, C) F32 the gradient of the layer output and leaves there the gradient of the
// layer input; scratch (N, C) F32 is clobbered. Parameter gradients accumulate (+=). With inputGrad false no
// one reads the input's gradient (the first layer over frozen embeddings): the Q, K and V projections skip
// their input-gradient GEMMs, as autograd does for an input that needs no gradient, and grad is left holding
// part of it only.
func (l *Layer) Backward(p *Pass, sc *layerScratch, grad, scratch *tensor.Tensor, b, t int, inputGrad bool) error {
	c := &l.c
	// output.LayerNorm; then da collects the residual and the FFN branch.
	da := scratch
	dy, biasDone, err := l.normBackward(p, l.OutNorm, sc.y, da, grad, c.r2, c.mean2, c.rstd2, c.drop2Used, c.drop2Off, fusedBias(l.Output)) // (N, C) h
	if err != nil {
		return err
	}
	if err := l.ffnBackward(p, sc, da, dy, biasDone); err != nil {
		return err
	}
	// attention.output.LayerNorm; then dx collects the residual and the attention branch.
	dx := grad
	if dy, biasDone, err = l.normBackward(p, l.AttnNorm, sc.y, dx, da, c.r1, c.mean1, c.rstd1, c.drop1Used, c.drop1Off, fusedBias(l.AttnOut)); err != nil {
		return err
	}
	if biasDone { // attention.output.dense's bias gradient came with the LayerNorm backward
		lin := l.AttnOut.(*Linear)
		if err := lin.backwardInput(p, sc.dctx, dy, false); err != nil {
			return err
		}
		if err := lin.backwardWeight(p, dy, c.ctx); err != nil {
			return err
		}
	} else if err := l.AttnOut.Backward(p, sc.dctx, dy, c.ctx, false); err != nil {
		return err
	}
	if !inputGrad {
		dx = nil
	}
	return l.Attention.Backward(p, &sc.attn, dx, sc.dctx, c.xIn, b, t)
}

// fusedBias returns the bias gradient of proj when proj is a plain Linear with a trainable bias: the column
// sum of its output's gradient, which the LayerNorm backward before it can form in its own pass (normBackward);
// nil otherwise (a LoRA wrapper, a frozen or absent bias).
func fusedBias(proj Projection) *tensor.Tensor {
	if l, ok := proj.(*Linear); ok && l.Bias != nil && l.Bias.Grad != nil {
		return l.Bias.Grad
	}
	return nil
}

// ffnBackward runs the feed-forward block's backward from dy, the gradient of output.dense's output:
// output.dense, the GELU, and intermediate.dense, whose input gradient it adds into da. The GELU output g,
// output.dense's input, was not kept: it is recomputed from u (bit-identical to the forward's). For a plain
// Linear output.dense the input gradient comes first, then one GELUBackwardRecompute pass over u gives the
// GELU gradient, g (none when the weight is frozen: no one reads g) and, for a plain Linear
// intermediate.dense with a trainable bias, that bias's gradient; then the weight gradients. Another
// projection (a LoRA wrapper) needs g before its Backward, so there GELU runs first. The values are the
// separate ops' bits either way. With biasDone output.dense's bias gradient is already formed (normBackward).
func (l *Layer) ffnBackward(p *Pass, sc *layerScratch, da, dy *tensor.Tensor, biasDone bool) error {
	bk, c := p.Backend, &l.c
	var dbias *tensor.Tensor // intermediate.dense's bias gradient, if the GELU pass forms it
	inter, interLinear := l.Intermediate.(*Linear)
	if out, ok := l.Output.(*Linear); ok {
		if err := out.backwardInput(p, sc.dg, dy, false); err != nil {
			return err
		}
		var g *tensor.Tensor
		if out.Weight.Grad != nil {
			g = sc.g
		}
		if interLinear && inter.Bias != nil && inter.Bias.Grad != nil {
			dbias = inter.Bias.Grad
		}
		u := c.u
		if c.uShared { // the frozen block kept its input: u again, into the scratch g (no one reads g here)
			if u = sc.g; g != nil {
				return errors.New("transformer: internal error: u recomputed into the scratch g that output.dense's weight gradient reads")
			}
			if err := inter.Forward(p, u, c.aIn); err != nil {
				return err
			}
		}
		if err := bk.GELUBackwardRecompute(sc.dg, g, dbias, sc.dg, u); err != nil {
			return err
		}
		var err error
		if biasDone {
			err = out.backwardWeight(p, dy, sc.g)
		} else {
			err = out.backwardParams(p, dy, sc.g)
		}
		if err != nil {
			return err
		}
	} else {
		if err := bk.GELU(sc.g, c.u); err != nil {
			return err
		}
		if err := l.Output.Backward(p, sc.dg, dy, sc.g, false); err != nil {
			return err
		}
		if err := bk.GELUBackward(sc.dg, sc.dg, c.u); err != nil {
			return err
		}
	}
	if dbias == nil {
		return l.Intermediate.Backward(p, da, sc.dg, c.aIn, true)
	}
	if err := inter.backwardInput(p, da, sc.dg, true); err != nil {
		return err
	}
	return inter.backwardWeight(p, sc.dg, c.aIn)
}

// normBackward runs the backward of a ResidualLayerNorm (norm over dropout(y) + x, saved sum, mean, rstd):
// dx (N, C) F32 = the residual's gradient, and it returns the branch's gradient, dx passed back through the
// hidden dropout and rounded to the GEMM dtype into dst, or dx itself when neither applies (FP32, no dropout).
// dbias, when set, is the bias gradient of the branch's projection: it is accumulated from the branch's
// gradient in the same op when there is one to form (BiasGrad's bits), and biasDone reports that.
func (l *Layer) normBackward(p *Pass, n *LayerNorm, dst, dx, dout, sum, mean, rstd *tensor.Tensor, dropUsed bool, off uint64, dbias *tensor.Tensor) (dy *tensor.Tensor, biasDone bool, err error) {
	if !dropUsed && dst.DType == dx.DType {
		return dx, false, n.Backward(p, dx, dout, sum, mean, rstd)
	}
	var prob float32
	if dropUsed {
		prob = l.HiddenDropout
	}
	return dst, dbias != nil, n.BackwardResidual(p, dx, dst, dbias, dout, sum, mean, rstd, prob, off)
}
