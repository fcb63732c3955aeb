package llama

import (
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// Attention is LlamaAttention (and Qwen2/Qwen3/Mistral's): q, k, v projections to Hq and Hkv heads of D
// features, Qwen3's q/k RMSNorm over each head, rotary embeddings, causal grouped-query attention through the
// fused op (tensor.Backend.Attention, scaling D^−½), and o_proj.
type Attention struct {
	Q, K, V, O   transformer.Projection // q_proj (C → Hq·D), k_proj, v_proj (C → Hkv·D), o_proj (Hq·D → C)
	QNorm, KNorm *transformer.RMSNorm   // Qwen3's q_norm and k_norm (D); nil otherwise
	Hq, Hkv, D   int                    // query heads, key/value heads, head size
}

// MLP is LlamaMLP: down_proj(silu(gate_proj(x))·up_proj(x)).
type MLP struct {
	Gate, Up, Down transformer.Projection // gate_proj, up_proj (C → I), down_proj (I → C)
}

// DecoderLayer is LlamaDecoderLayer, pre-norm: h = x + o_proj(attn(input_layernorm(x))), out = h +
// mlp(post_attention_layernorm(h)). The residual stream is FP32 under every policy (the FP32 model's hidden
// states under autocast); projections run in the pass's GEMM dtype.
type DecoderLayer struct {
	InputNorm *transformer.RMSNorm // input_layernorm
	Attn      Attention            // self_attn
	PostNorm  *transformer.RMSNorm // post_attention_layernorm
	MLP       MLP                  // mlp

	c      layerCache
	stack  *transformer.LinearStack    // q_proj, k_proj, v_proj as one packed projection (NewLinearStack), or nil
	mstack *transformer.LinearStack    // gate_proj and up_proj (mlpStack), or nil
	qkvG   transformer.ProjectionGroup // q_proj, k_proj, v_proj as one group (LoRA adapters: transformer.GroupOf), or nil
	guG    transformer.ProjectionGroup // gate_proj and up_proj as one group, or nil
}

// layerCache holds what one layer's backward needs from its forward (views of the step arena); h is the GEMM
// dtype, N = B·T. Bandwidth-cheap values are not kept but recomputed in backward by the same kernels, so bit
// for bit (selective recomputation, as Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
// Transformer Models", and unsloth/Liger do): the normed inputs of the attention and MLP projections
// (input_layernorm(x) from x and post_attention_layernorm(x2) from x2, into layerScratch.xn) and silu(gate)·up
// (from g and u, into layerScratch.dg). They cost one RMSNorm or SwiGLU pass each and save 2·N·C + N·I
// half-precision values per layer.
type layerCache struct {
	rstd1, rstd2 *tensor.Tensor // (N) F32
	qpre, kpre   *tensor.Tensor // (N, Hq·D), (N, Hkv·D) h: q_proj/k_proj outputs before q_norm/k_norm (Qwen3)
	qrstd, krstd *tensor.Tensor // (N·Hq), (N·Hkv) F32 (Qwen3)
	qkv          *tensor.Tensor // (N, Hq·D + 2·Hkv·D) h: q, k, v (after RoPE), packed rows or the three below
	q, k, v      *tensor.Tensor // (N, Hq·D), (N, Hkv·D) h: dense views one after another in qkv (unpacked path)
	packed       bool           // the last forward wrote q, k, v as column blocks of qkv's rows
	o            *tensor.Tensor // (N, Hq·D) h attention output
	lse          *tensor.Tensor // (B, Hq, T) F32
	x2           *tensor.Tensor // (N, C) F32 the residual after attention
	g, u         *tensor.Tensor // (N, I) h gate and up, adjacent; (I, N) each on the transposed MLP path
	gu           *tensor.Tensor // (2·N·I) h: g then u
	mlpT         bool           // the last forward ran the MLP transposed (mlpStack)
}

// layerScratch is shared by every layer of a pass.
type layerScratch struct {
	y          *tensor.Tensor // (N, C) h o_proj and down_proj outputs
	xn         *tensor.Tensor // (N, C) h a norm's output, the input of the q/k/v or gate/up projections
	rstd       *tensor.Tensor // (N) F32 the rstd a recomputed norm writes (equal to the kept one)
	dh         *tensor.Tensor // (N, C) F32 gradient of a norm's output
	gh         *tensor.Tensor // (N, C) h the residual gradient as the GEMMs read it; nil under FP32
	dqkv       *tensor.Tensor // (N, Hq·D + 2·Hkv·D) h: the attention's dQ, dK, dV, laid out as the forward's qkv
	do, dq     *tensor.Tensor // (N, Hq·D) h; dq is dqkv's first dense block (unpacked path)
	dk, dv     *tensor.Tensor // (N, Hkv·D) h dense blocks of dqkv (unpacked path)
	ds, dg, du *tensor.Tensor // (N, I) h (transposed path: (I, N)); dg holds silu(gate)·up, down_proj's input, until SwiGLUBackward (per-projection path)
	dgu        *tensor.Tensor // (2·N·I) h: dg then du
	qf, kf     *tensor.Tensor // (N, Hq·D), (N, Hkv·D) F32: Qwen3's normed q/k before RoPE (and their gradients)
}

// passInputs are the model-level tensors every layer reads.
type passInputs struct {
	b, t     int
	pos      *tensor.Tensor // (B, T) I32 positions
	cos, sin *tensor.Tensor // (P, D/2) F32 rotary tables
	mask     *tensor.Tensor // (B, T) F32 additive key mask, or nil
	segments *tensor.Tensor // (B, T) I32 segment ids, or nil
}

func layoutLayerScratch(a *transformer.Arena, n int, cfg *Config, dt tensor.DType) layerScratch {
	c, inter, qd, kvd := cfg.HiddenSize, cfg.IntermediateSize, cfg.QDim(), cfg.KVDim()
	s := layerScratch{
		y: a.Take(dt, n, c), xn: a.Take(dt, n, c), rstd: a.Take(tensor.F32, n),
		dh: a.Take(tensor.F32, n, c),
		do: a.Take(dt, n, qd), dqkv: a.Take(dt, n, qd+2*kvd),
		ds: a.Take(dt, n, inter),
	}
	s.dgu = a.Take(dt, 2*n*inter)
	s.dg, s.du = halves(s.dgu, n, inter)
	s.dq, s.dk, s.dv = blocks(s.dqkv, n, qd, kvd)
	if dt != tensor.F32 {
		s.gh = a.Take(dt, n, c)
	}
	if cfg.QKNorm {
		s.qf, s.kf = a.Take(tensor.F32, n, qd), a.Take(tensor.F32, n, kvd)
	}
	return s
}

func (l *DecoderLayer) layout(a *transformer.Arena, b, t int, cfg *Config, dt tensor.DType) {
	n, c, inter, qd, kvd := b*t, cfg.HiddenSize, cfg.IntermediateSize, cfg.QDim(), cfg.KVDim()
	l.c = layerCache{
		rstd1: a.Take(tensor.F32, n), rstd2: a.Take(tensor.F32, n),
		qkv: a.Take(dt, n, qd+2*kvd), o: a.Take(dt, n, qd),
		lse: a.Take(tensor.F32, b, l.Attn.Hq, t), x2: a.Take(tensor.F32, n, c),
	}
	l.c.gu = a.Take(dt, 2*n*inter)
	l.c.g, l.c.u = halves(l.c.gu, n, inter)
	l.c.q, l.c.k, l.c.v = blocks(l.c.qkv, n, qd, kvd)
	if l.Attn.QNorm != nil {
		l.c.qpre, l.c.kpre = a.Take(dt, n, qd), a.Take(dt, n, kvd)
		l.c.qrstd, l.c.krstd = a.Take(tensor.F32, n*l.Attn.Hq), a.Take(tensor.F32, n*l.Attn.Hkv)
	}
	for _, p := range []transformer.Projection{l.Attn.Q, l.Attn.K, l.Attn.V, l.Attn.O, l.MLP.Gate, l.MLP.Up, l.MLP.Down} {
		p.Layout(a, n, dt)
	}
	// Projections that are not plain Linears (LoRA adapters) may still share their input's work as a group.
	at, ml := &l.Attn, &l.MLP
	l.qkvG, l.guG = nil, nil
	if at.QNorm == nil && l.qkvStack() == nil {
		l.qkvG = transformer.GroupOf(at.Q, at.K, at.V)
	}
	if l.mlpStack() == nil {
		l.guG = transformer.GroupOf(ml.Gate, ml.Up)
	}
	for _, g := range []transformer.ProjectionGroup{l.qkvG, l.guG} {
		if g != nil {
			g.Layout(a, n, dt)
		}
	}
}

// Parameters lists the layer's parameters as LlamaDecoderLayer.named_parameters() does: self_attn (q, k, v,
// o, then q_norm and k_norm), mlp (gate, up, down), input_layernorm, post_attention_layernorm.
func (l *DecoderLayer) Parameters() []transformer.NamedParameter {
	var ps []transformer.NamedParameter
	ps = transformer.AppendPrefixed(ps, "self_attn.q_proj.", l.Attn.Q.Parameters())
	ps = transformer.AppendPrefixed(ps, "self_attn.k_proj.", l.Attn.K.Parameters())
	ps = transformer.AppendPrefixed(ps, "self_attn.v_proj.", l.Attn.V.Parameters())
	ps = transformer.AppendPrefixed(ps, "self_attn.o_proj.", l.Attn.O.Parameters())
	if l.Attn.QNorm != nil {
		ps = transformer.AppendPrefixed(ps, "self_attn.q_norm.", l.Attn.QNorm.Parameters())
		ps = transformer.AppendPrefixed(ps, "self_attn.k_norm.", l.Attn.KNorm.Parameters())
	}
	ps = transformer.AppendPrefixed(ps, "mlp.gate_proj.", l.MLP.Gate.Parameters())
	ps = transformer.AppendPrefixed(ps, "mlp.up_proj.", l.MLP.Up.Parameters())
	ps = transformer.AppendPrefixed(ps, "mlp.down_proj.", l.MLP.Down.Parameters())
	ps = transformer.AppendPrefixed(ps, "input_layernorm.", l.InputNorm.Parameters())
	ps = transformer.AppendPrefixed(ps, "post_attention_layernorm.", l.PostNorm.Parameters())
	return ps
}

// blocks returns the dense (n, qd), (n, kvd), (n, kvd) views one after another in buf.
func blocks(buf *tensor.Tensor, n, qd, kvd int) (q, k, v *tensor.Tensor) {
	view := func(off, c int) *tensor.Tensor {
		t, err := buf.View(off, n, c)
		if err != nil {
			panic(err)
		}
		return t
	}
	return view(0, qd), view(n*qd, kvd), view(n*(qd+kvd), kvd)
}

// GroupedAdapters reports whether the last layout runs the layer's q/k/v and gate/up projections as
// transformer.ProjectionGroups (package lora's adapters sharing their input's GEMMs).
func (l *DecoderLayer) GroupedAdapters() bool { return l.qkvG != nil && l.guG != nil }

// halves returns the two (n, c) views one after another in buf (2·n·c elements).
func halves(buf *tensor.Tensor, n, c int) (a, b *tensor.Tensor) {
	a, err := buf.View(0, n, c)
	if err == nil {
		b, err = buf.View(n*c, n, c)
	}
	if err != nil {
		panic(err)
	}
	return a, b
}

// mlpStack returns gate_proj and up_proj as one joined transformer.LinearStack when the MLP can run
// transposed: both plain Linears without biases with adjacent weights (and gradients), and down_proj a plain
// Linear. The pair's output is then written as gateᵀ and upᵀ, two dense (I, N) blocks (ForwardT), SwiGLU
// runs on them as they are, and down_proj reads its input transposed (ForwardFromT): one GEMM for gate and
// up in each of the forward, the input gradient and the weight gradient, instead of two each.
func (l *DecoderLayer) mlpStack() *transformer.LinearStack {
	ml := &l.MLP
	if _, ok := ml.Down.(*transformer.Linear); !ok {
		return nil
	}
	if !l.mstack.Matches(ml.Gate, ml.Up) {
		l.mstack = nil
		if biasFree(ml.Gate, ml.Up) {
			l.mstack = transformer.NewLinearStack(ml.Gate, ml.Up)
		}
	}
	if l.mstack == nil || !l.mstack.Joined() {
		return nil
	}
	return l.mstack
}

// qkvStack returns q_proj, k_proj and v_proj as one transformer.LinearStack when the layer can run them packed
// (plain Linears without biases and no Qwen3 q/k norm), else nil. The stack is kept (its joined weight view
// is what the weight-cast cache knows) and rebuilt when a projection was replaced.
func (l *DecoderLayer) qkvStack() *transformer.LinearStack {
	at := &l.Attn
	if at.QNorm != nil {
		return nil
	}
	if !l.stack.Matches(at.Q, at.K, at.V) {
		l.stack = nil
		if biasFree(at.Q, at.K, at.V) {
			l.stack = transformer.NewLinearStack(at.Q, at.K, at.V)
		}
	}
	return l.stack
}

// biasFree reports whether every projection of ps is a plain Linear without a bias. The decoder stacks only
// those: Qwen2's q/k/v biases are not laid out next to each other (the model does not call
// ModelCore.SetStacks), the transposed MLP form has no bias epilogue, and LoRA adapters run as
// transformer.ProjectionGroups instead.
func biasFree(ps ...transformer.Projection) bool {
	for _, p := range ps {
		if l, ok := p.(*transformer.Linear); !ok || l.Bias != nil {
			return false
		}
	}
	return true
}

// heads views a (N, H·D) projection buffer as the (B, H, T, D) attention operand it holds.
func heads(t *tensor.Tensor, T, h, d int) tensor.AttnOperand {
	return tensor.AttnOperand{T: t, StrideB: T * h * d, StrideH: d, StrideT: h * d}
}

// rows views x (N, H·D) as (N·H, D), the rows a per-head RMSNorm normalises.
func rows(x *tensor.Tensor, d int) *tensor.Tensor {
	v, err := x.Reshape(x.Numel()/d, d)
	if err != nil {
		panic(err)
	}
	return v
}

// attnArgs returns the fused attention's arguments for this layer's buffers (the q, k, v layout of the last
// forward).
func (l *DecoderLayer) attnArgs(in *passInputs) tensor.AttentionArgs {
	at, c, t := &l.Attn, &l.c, in.t
	a := tensor.AttentionArgs{
		B: in.b, Hq: at.Hq, Hkv: at.Hkv, Tq: t, Tk: t, D: at.D,
		Q: heads(c.q, t, at.Hq, at.D), K: heads(c.k, t, at.Hkv, at.D), V: heads(c.v, t, at.Hkv, at.D),
		O: heads(c.o, t, at.Hq, at.D), LSE: c.lse, Scale: float32(1 / sqrtf(float64(at.D))),
		Mask: in.mask, Causal: true, Segments: in.segments,
	}
	if c.packed {
		a.Q, a.K, a.V = l.packedHeads(c.qkv, t)
	}
	return a
}

// packedHeads views the q, k and v column blocks of a packed (N, Hq·D + 2·Hkv·D) buffer as attention operands.
func (l *DecoderLayer) packedHeads(buf *tensor.Tensor, t int) (q, k, v tensor.AttnOperand) {
	at := &l.Attn
	qd, kvd := at.Hq*at.D, at.Hkv*at.D
	ld := qd + 2*kvd
	from := func(off int) *tensor.Tensor {
		v, err := buf.View(off, buf.Numel()-off)
		if err != nil {
			panic(err)
		}
		return v
	}
	return transformer.RowHeads(buf, t, ld, at.D), transformer.RowHeads(from(qd), t, ld, at.D),
		transformer.RowHeads(from(qd+kvd), t, ld, at.D)
}

// ropeQK rotates the q and k heads of a packed buffer (its first Hq + Hkv heads) in one RoPE call.
func (l *DecoderLayer) ropeQK(bk tensor.Backend, in *passInputs, buf *tensor.Tensor, inverse bool) error {
	at := &l.Attn
	h := at.Hq + at.Hkv
	return bk.RoPE(transformer.RowHeads(buf, in.t, (at.Hq+2*at.Hkv)*at.D, at.D), in.b, h, in.t, at.D, in.pos, in.cos, in.sin, inverse)
}

// project computes one of q or k: the projection, Qwen3's per-head norm, and RoPE, into dst (N, H·D) h.
func (l *DecoderLayer) project(p *transformer.Pass, sc *layerScratch, in *passInputs, proj transformer.Projection,
	norm *transformer.RMSNorm, pre, rstd, f, dst, xh *tensor.Tensor, h int) error {
	bk, d := p.Backend, l.Attn.D
	if norm == nil {
		if err := proj.Forward(p, dst, xh); err != nil {
			return err
		}
		return bk.RoPE(heads(dst, in.t, h, d), in.b, h, in.t, d, in.pos, in.cos, in.sin, false)
	}
	// Qwen3Attention: q_norm(q_proj(x).view(..., D)) gives FP32 under autocast (an FP32 weight times the
	// half normalised value), RoPE runs on it in FP32, and attention reads it rounded to the GEMM dtype.
	if err := proj.Forward(p, pre, xh); err != nil {
		return err
	}
	if err := norm.Forward(p, rows(f, d), rstd, rows(pre, d)); err != nil {
		return err
	}
	if err := bk.RoPE(heads(f, in.t, h, d), in.b, h, in.t, d, in.pos, in.cos, in.sin, false); err != nil {
		return err
	}
	return bk.Cast(dst, f)
}

// mlpForward computes down_proj(silu(gate_proj(h))·up_proj(h)) into sc.y, transposed when mlpStack allows.
func (l *DecoderLayer) mlpForward(p *transformer.Pass, sc *layerScratch, h *tensor.Tensor) error {
	bk, c, ml := p.Backend, &l.c, &l.MLP
	s := sc.dg
	st := l.mlpStack()
	c.mlpT = st != nil
	if st != nil {
		if err := st.ForwardT(p, c.gu, h); err != nil { // gateᵀ then upᵀ
			return err
		}
		if err := bk.SwiGLU(s, c.g, c.u); err != nil {
			return err
		}
		return ml.Down.(*transformer.Linear).ForwardFromT(p, sc.y, s)
	}
	if g := l.guG; g != nil {
		if err := g.Forward(p, []*tensor.Tensor{c.g, c.u}, h); err != nil {
			return err
		}
	} else {
		if err := ml.Gate.Forward(p, c.g, h); err != nil {
			return err
		}
		if err := ml.Up.Forward(p, c.u, h); err != nil {
			return err
		}
	}
	if err := bk.SwiGLU(s, c.g, c.u); err != nil {
		return err
	}
	return ml.Down.Forward(p, sc.y, s)
}

// projectQKV is the unpacked path of q, k and v: each projection (with Qwen3's norm and RoPE for q and k)
// into its own dense buffer (k and v into kdst and vdst: the layer's, or a decode pass's cache rows).
func (l *DecoderLayer) projectQKV(p *transformer.Pass, sc *layerScratch, in *passInputs, kdst, vdst, xh *tensor.Tensor) error {
	c, at := &l.c, &l.Attn
	if g := l.qkvG; g != nil {
		bk, d := p.Backend, at.D
		if err := g.Forward(p, []*tensor.Tensor{c.q, kdst, vdst}, xh); err != nil {
			return err
		}
		if err := bk.RoPE(heads(c.q, in.t, at.Hq, d), in.b, at.Hq, in.t, d, in.pos, in.cos, in.sin, false); err != nil {
			return err
		}
		return bk.RoPE(heads(kdst, in.t, at.Hkv, d), in.b, at.Hkv, in.t, d, in.pos, in.cos, in.sin, false)
	}
	if err := l.project(p, sc, in, at.Q, at.QNorm, c.qpre, c.qrstd, sc.qf, c.q, xh, at.Hq); err != nil {
		return err
	}
	if err := l.project(p, sc, in, at.K, at.KNorm, c.kpre, c.krstd, sc.kf, kdst, xh, at.Hkv); err != nil {
		return err
	}
	return at.V.Forward(p, vdst, xh)
}

// layerKV is a decode pass's view of one layer's key/value cache (transformer.KVCache): k_proj and v_proj
// (after RoPE) write the new positions' rows, and attention reads every cached position.
type layerKV struct {
	k, v       *tensor.Tensor // (n, Hkv·D) h: cache rows [start, start+n), the new tokens'
	kAll, vAll *tensor.Tensor // (start+n, Hkv·D) h: cache rows [0, start+n)
}

// Forward runs the layer on x (N, C) F32 into out (N, C) F32.
func (l *DecoderLayer) Forward(p *transformer.Pass, sc *layerScratch, in *passInputs, out, x *tensor.Tensor) error {
	return l.forward(p, sc, in, nil, out, x, link{})
}

// link joins a layer's forward to its neighbours' norms: the last residual add and the RMSNorm that reads
// its result run as one ResidualRMSNorm (transformer.RMSNorm.ResidualForward), and the next layer then
// starts from the normed input it left in the shared scratch.
type link struct {
	normed bool                 // sc.xn and this layer's rstd1 already hold input_layernorm(x)
	next   *transformer.RMSNorm // the norm after this layer (the next input_layernorm or model.norm), or nil
	nout   *tensor.Tensor       // (N, C) h: where next's output goes
	nrstd  *tensor.Tensor       // (N) F32: next's rstd
}

// forward is Forward; with kv (a decode pass, B = 1) the keys and values go into the cache rows and the
// queries of the T new tokens attend to all start+T cached positions (causal, bottom-right aligned); lk
// says which of the norms around the layer are fused with the residual adds.
func (l *DecoderLayer) forward(p *transformer.Pass, sc *layerScratch, in *passInputs, kv *layerKV, out, x *tensor.Tensor, lk link) error {
	bk, c, at := p.Backend, &l.c, &l.Attn
	kdst, vdst := c.k, c.v
	if kv != nil {
		kdst, vdst = kv.k, kv.v
	}
	xh := sc.xn
	if !lk.normed {
		if err := l.InputNorm.Forward(p, xh, c.rstd1, x); err != nil {
			return err
		}
	}
	c.packed = false
	if st := l.qkvStack(); st != nil && kv == nil {
		// q, k, v as one packed projection, q and k rotated in one call
		c.packed = true
		if err := st.Forward(p, c.qkv, xh); err != nil {
			return err
		}
		if err := l.ropeQK(bk, in, c.qkv, false); err != nil {
			return err
		}
	} else if err := l.projectQKV(p, sc, in, kdst, vdst, xh); err != nil {
		return err
	}
	args := l.attnArgs(in)
	if kv != nil {
		tk := kv.kAll.Numel() / (at.Hkv * at.D)
		args.Tk, args.K, args.V = tk, heads(kv.kAll, tk, at.Hkv, at.D), heads(kv.vAll, tk, at.Hkv, at.D)
	}
	if err := bk.Attention(args); err != nil {
		return err
	}
	if err := at.O.Forward(p, sc.y, c.o); err != nil {
		return err
	}
	h2h := sc.xn
	if err := l.PostNorm.ResidualForward(p, c.x2, h2h, c.rstd2, x, sc.y); err != nil { // x2 = x + o_proj(attn)
		return err
	}
	if err := l.mlpForward(p, sc, h2h); err != nil {
		return err
	}
	if lk.next != nil {
		return lk.next.ResidualForward(p, out, lk.nout, lk.nrstd, c.x2, sc.y)
	}
	return bk.Add(out, c.x2, sc.y)
}

// unproject is project's backward: from dy (N, H·D) h, the gradient of the attention operand, it accumulates
// the gradient of xh into dh (accumulate: += after the first of q, k, v).
func (l *DecoderLayer) unproject(p *transformer.Pass, in *passInputs, proj transformer.Projection, norm *transformer.RMSNorm,
	pre, rstd, f, dy, xh, dh *tensor.Tensor, h int, accumulate bool) error {
	bk, d := p.Backend, l.Attn.D
	if norm == nil {
		if err := bk.RoPE(heads(dy, in.t, h, d), in.b, h, in.t, d, in.pos, in.cos, in.sin, true); err != nil {
			return err
		}
		return proj.Backward(p, dh, dy, xh, accumulate)
	}
	if err := bk.Cast(f, dy); err != nil {
		return err
	}
	if err := bk.RoPE(heads(f, in.t, h, d), in.b, h, in.t, d, in.pos, in.cos, in.sin, true); err != nil {
		return err
	}
	if err := norm.Backward(p, rows(dy, d), rows(f, d), rows(pre, d), rstd); err != nil {
		return err
	}
	return proj.Backward(p, dh, dy, xh, accumulate)
}

// Backward back-propagates the layer: grad (N, C) F32 holds d(out) — and, under autocast, sc.gh the same in
// the GEMM dtype, as the norm backward above wrote it (transformer.RMSNorm.ResidualBackward) — and both are
// overwritten with d(x); x is the forward's input.
func (l *DecoderLayer) Backward(p *transformer.Pass, sc *layerScratch, in *passInputs, grad, x *tensor.Tensor) error {
	bk, c, at := p.Backend, &l.c, &l.Attn
	// MLP branch: out = x2 + down(s). Autograd rounds the gradient of a half branch output to half.
	dy := grad
	if sc.gh != nil {
		dy = sc.gh
	}
	if c.mlpT {
		// d(silu(g)·u) first, then one pass over g and u forms both SwiGLU gradients and recomputes
		// s = silu(g)·u over g (g's last use), which down_proj's weight gradient reads.
		down := l.MLP.Down.(*transformer.Linear)
		if err := down.BackwardInputToT(p, sc.ds, dy); err != nil {
			return err
		}
		if err := bk.SwiGLUBackwardRecompute(sc.dg, sc.du, c.g, sc.ds, c.g, c.u); err != nil {
			return err
		}
		if err := down.BackwardParamsFromT(p, dy, c.g); err != nil {
			return err
		}
	} else {
		s := sc.dg // recomputed: the forward's SwiGLU on the kept g and u, bit for bit
		if err := bk.SwiGLU(s, c.g, c.u); err != nil {
			return err
		}
		if err := l.MLP.Down.Backward(p, sc.ds, dy, s, false); err != nil {
			return err
		}
		if err := bk.SwiGLUBackward(sc.dg, sc.du, sc.ds, c.g, c.u); err != nil {
			return err
		}
	}
	h2h := sc.xn // recomputed: post_attention_layernorm(x2), as the forward computed it
	if err := l.PostNorm.Forward(p, h2h, sc.rstd, c.x2); err != nil {
		return err
	}
	if c.mlpT {
		if err := l.mstack.BackwardT(p, sc.dh, sc.dgu, h2h, false); err != nil { // from d(gateᵀ), d(upᵀ)
			return err
		}
	} else if g := l.guG; g != nil {
		if err := g.Backward(p, sc.dh, []*tensor.Tensor{sc.dg, sc.du}, h2h, false); err != nil {
			return err
		}
	} else {
		if err := l.MLP.Gate.Backward(p, sc.dh, sc.dg, h2h, false); err != nil {
			return err
		}
		if err := l.MLP.Up.Backward(p, sc.dh, sc.du, h2h, true); err != nil {
			return err
		}
	}
	if err := l.PostNorm.ResidualBackward(p, grad, sc.gh, sc.dh, c.x2, c.rstd2, true); err != nil { // grad = d(x2)
		return err
	}
	// Attention branch: x2 = x + o_proj(attn).
	if err := at.O.Backward(p, sc.do, dy, c.o, false); err != nil {
		return err
	}
	a := tensor.AttentionBackwardArgs{AttentionArgs: l.attnArgs(in)}
	a.DO = heads(sc.do, in.t, at.Hq, at.D)
	a.DQ, a.DK, a.DV = heads(sc.dq, in.t, at.Hq, at.D), heads(sc.dk, in.t, at.Hkv, at.D), heads(sc.dv, in.t, at.Hkv, at.D)
	if c.packed {
		a.DQ, a.DK, a.DV = l.packedHeads(sc.dqkv, in.t)
	}
	if err := bk.AttentionBackward(a); err != nil {
		return err
	}
	xh := sc.xn // recomputed: input_layernorm(x)
	if err := l.InputNorm.Forward(p, xh, sc.rstd, x); err != nil {
		return err
	}
	if c.packed {
		if err := l.ropeQK(bk, in, sc.dqkv, true); err != nil {
			return err
		}
		if err := l.stack.Backward(p, sc.dh, sc.dqkv, xh, false); err != nil {
			return err
		}
	} else if err := l.unprojectQKV(p, sc, in, xh); err != nil {
		return err
	}
	return l.InputNorm.ResidualBackward(p, grad, sc.gh, sc.dh, x, c.rstd1, true) // grad = d(x)
}

// unprojectQKV is projectQKV's backward: the gradients of q, k, v (sc.dq, sc.dk, sc.dv) through RoPE, the
// norms and the projections into sc.dh.
func (l *DecoderLayer) unprojectQKV(p *transformer.Pass, sc *layerScratch, in *passInputs, xh *tensor.Tensor) error {
	c, at := &l.c, &l.Attn
	if g := l.qkvG; g != nil {
		bk, d := p.Backend, at.D
		if err := bk.RoPE(heads(sc.dq, in.t, at.Hq, d), in.b, at.Hq, in.t, d, in.pos, in.cos, in.sin, true); err != nil {
			return err
		}
		if err := bk.RoPE(heads(sc.dk, in.t, at.Hkv, d), in.b, at.Hkv, in.t, d, in.pos, in.cos, in.sin, true); err != nil {
			return err
		}
		return g.Backward(p, sc.dh, []*tensor.Tensor{sc.dq, sc.dk, sc.dv}, xh, false)
	}
	if err := l.unproject(p, in, at.Q, at.QNorm, c.qpre, c.qrstd, sc.qf, sc.dq, xh, sc.dh, at.Hq, false); err != nil {
		return err
	}
	if err := l.unproject(p, in, at.K, at.KNorm, c.kpre, c.krstd, sc.kf, sc.dk, xh, sc.dh, at.Hkv, true); err != nil {
		return err
	}
	return at.V.Backward(p, sc.dh, sc.dv, xh, true)
}
