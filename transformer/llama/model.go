package llama

import (
	"fmt"
	"math"
	"strconv"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// ForCausalLM is transformers' LlamaForCausalLM, and with its Config's options Qwen2ForCausalLM,
// Qwen3ForCausalLM and MistralForCausalLM: token embeddings, L pre-norm decoder layers, a final RMSNorm and the
// LM head (tied to the embeddings when tie_word_embeddings), trained with the shifted next-token cross-entropy.
// It implements transformer.Adaptable (the trainer trains it; package lora adapts its projections) and
// trainer.Loader.
type ForCausalLM struct {
	Config Config               // the configuration the model was built from
	Embed  *transformer.Param   // model.embed_tokens.weight (V, C)
	Layers []*DecoderLayer      // model.layers.0 … L−1
	Norm   *transformer.RMSNorm // model.norm
	// Head is lm_head (C → V, no bias) with the shifted cross-entropy, run chunk by chunk; when tied its
	// Weight is Embed, and the shared weight's gradient sums both uses.
	Head *transformer.CausalLMHead

	transformer.ModelCore

	shape carveKey
	act   activations
	sc    layerScratch
	rope  ropeState
	host  hostBuffers
	last  lastForward
	extra savedExtras // files of the checkpoint directory saved back (generation_config.json)
	ckpt  checkpointing
}

type carveKey struct {
	b, t int
	dt   tensor.DType
}

// activations are the model-level buffers of one pass (views of the step arena); N = B·T.
type activations struct {
	ids      *tensor.Tensor   // (N) I32
	pos      *tensor.Tensor   // (B, T) I32
	mask     *tensor.Tensor   // (B, T) F32 additive key mask
	segments *tensor.Tensor   // (B, T) I32
	hs       []*tensor.Tensor // L+1 residual streams (N, C) F32: hs[i] enters layer i, hs[L] leaves the last
	rstdF    *tensor.Tensor   // (N) F32 of the final norm
	xf       *tensor.Tensor   // (N, C) h final norm output, the LM head's input
	dxf      *tensor.Tensor   // (N, C) F32 gradient of xf
	grad     *tensor.Tensor   // (N, C) F32 residual gradient
	padRow   *tensor.Tensor   // (C) F32 the padding row of the embedding gradient, kept across the lookup's backward
}

type ropeState struct {
	inv      []float32
	p        int            // positions the tables hold
	cos, sin *tensor.Tensor // (p, D/2) F32 device tables
}

// hostBuffers are reused host-side staging slices (grown, never shrunk).
type hostBuffers struct {
	pos  []int32
	mask []float32
}

type lastForward struct {
	pass  transformer.Pass
	key   carveKey
	ready bool
	count int // supervised tokens
	in    passInputs
}

// New builds a model for cfg on b with weights initialised as transformers' _init_weights does: every Linear
// and the embedding normal(0, initializer_range) (the padding row zero), biases 0, RMSNorm weights 1.
func New(b tensor.Backend, cfg Config, seed uint64) (*ForCausalLM, error) {
	m, err := build(b, cfg)
	if err != nil {
		return nil, err
	}
	if err := m.InitWeights(seed); err != nil {
		return nil, err
	}
	return m, nil
}

// build allocates the model with zero weights (norms 1) and packs its parameters.
func build(b tensor.Backend, cfg Config) (m *ForCausalLM, err error) {
	defer recoverError(&err)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("llama: config %w", err)
	}
	m = &ForCausalLM{Config: cfg}
	m.InitCore(b, "llama", m.namedParameters, m.projectionSlots, m.reset)
	c, inter, eps := cfg.HiddenSize, cfg.IntermediateSize, float32(cfg.RMSNormEps)
	emb, err := b.Alloc(tensor.F32, cfg.VocabSize, c)
	if err != nil {
		return nil, fmt.Errorf("llama: embed_tokens (%d, %d): %w", cfg.VocabSize, c, err)
	}
	m.Embed = &transformer.Param{Value: emb, Trainable: true}
	lin := func(in, out int, bias bool) *transformer.Linear {
		if err != nil {
			return nil
		}
		var l *transformer.Linear
		l, err = transformer.NewLinear(b, in, out, bias)
		return l
	}
	norm := func(n int) *transformer.RMSNorm {
		if err != nil {
			return nil
		}
		var r *transformer.RMSNorm
		r, err = transformer.NewRMSNorm(b, n, eps)
		return r
	}
	qd, kvd := cfg.QDim(), cfg.KVDim()
	for range cfg.NumHiddenLayers {
		l := &DecoderLayer{
			InputNorm: norm(c), PostNorm: norm(c),
			Attn: Attention{
				Q: lin(c, qd, cfg.QKVBias), K: lin(c, kvd, cfg.QKVBias), V: lin(c, kvd, cfg.QKVBias), O: lin(qd, c, cfg.OBias),
				Hq: cfg.NumAttentionHeads, Hkv: cfg.NumKeyValueHeads, D: cfg.HeadDim,
			},
			MLP: MLP{Gate: lin(c, inter, cfg.MLPBias), Up: lin(c, inter, cfg.MLPBias), Down: lin(inter, c, cfg.MLPBias)},
		}
		if cfg.QKNorm {
			l.Attn.QNorm, l.Attn.KNorm = norm(cfg.HeadDim), norm(cfg.HeadDim)
		}
		m.Layers = append(m.Layers, l)
	}
	m.Norm = norm(c)
	m.Head = &transformer.CausalLMHead{Weight: m.Embed, V: cfg.VocabSize, C: c}
	if !cfg.TieWordEmbeddings {
		if head := lin(c, cfg.VocabSize, false); head != nil {
			m.Head.Weight = head.Weight
		}
	}
	if err != nil {
		return nil, err
	}
	m.rope.inv = invFreq(&m.Config)
	if err := m.Pack(); err != nil {
		return nil, err
	}
	return m, nil
}

// reset drops the carved arena shape and any pending Backward (ModelCore's changed hook: a new policy, a
// re-pack).
func (m *ForCausalLM) reset() {
	m.last.ready = false
	m.shape = carveKey{}
}

// Reserve sizes the step arena for batches up to b × t tokens.
func (m *ForCausalLM) Reserve(b, t int) error { return m.carve(b, t) }

func (m *ForCausalLM) carve(b, t int) error {
	key := carveKey{b, t, m.Policy().GemmDType()}
	return transformer.CarveFor(m.Arena(), &m.shape, key, m.layout)
}

func (m *ForCausalLM) layout(a *transformer.Arena, key carveKey) error {
	b, t, dt := key.b, key.t, key.dt
	n, c := b*t, m.Config.HiddenSize
	m.act = activations{
		ids: a.Take(tensor.I32, n), pos: a.Take(tensor.I32, b, t), mask: a.Take(tensor.F32, b, t),
		segments: a.Take(tensor.I32, b, t),
		rstdF:    a.Take(tensor.F32, n), xf: a.Take(dt, n, c),
		dxf: a.Take(tensor.F32, n, c), grad: a.Take(tensor.F32, n, c), padRow: a.Take(tensor.F32, c),
	}
	for range len(m.Layers) + 1 {
		m.act.hs = append(m.act.hs, a.Take(tensor.F32, n, c))
	}
	m.Head.Layout(a, n, dt)
	m.sc = layoutLayerScratch(a, n, &m.Config, dt)
	m.layoutLayers(a, b, t, dt)
	return nil
}

// Forward runs the model on batch: embeddings, decoder layers, the final norm and the LM head chunk by chunk,
// with the shifted next-token cross-entropy when the batch has (B, T) labels (Output.Loss: the sum over
// supervised tokens divided by Supervised). With opts.HostLogits, Output.Logits holds the (B, T, V) logits in
// FP32 (rounded to the GEMM dtype first under autocast); they are never kept on the device (Output.Device is
// nil). With opts.Train the activations are kept for Backward.
func (m *ForCausalLM) Forward(batch *loaders.Batch, opts transformer.ForwardOptions) (out transformer.Output, err error) {
	defer recoverError(&err)
	m.last.ready = false
	if err := m.checkBatch(batch); err != nil {
		return out, err
	}
	b, t := batch.B, batch.T
	if err := m.carve(b, t); err != nil {
		return out, err
	}
	in, err := m.upload(batch)
	if err != nil {
		return out, err
	}
	p := m.NewPass(opts)
	a := &m.act
	if err := m.Backend().Embedding(a.hs[0], a.ids, m.Embed.Value); err != nil {
		return out, fmt.Errorf("llama: embed_tokens: %w", err)
	}
	if err := p.Notify("model.embed_tokens", false, a.hs[0]); err != nil {
		return out, err
	}
	m.ckpt.offs = m.ckpt.offs[:0]
	// Each layer's last residual add runs fused with the norm after it (the next layer's input_layernorm,
	// or model.norm for the last), which then starts from the normed input in the shared scratch.
	L := len(m.Layers)
	for i, l := range m.Layers {
		m.ckpt.offs = append(m.ckpt.offs, p.Offset)
		lk := link{normed: i > 0, next: m.Norm, nout: a.xf, nrstd: a.rstdF}
		if i+1 < L {
			lk.next, lk.nout, lk.nrstd = m.Layers[i+1].InputNorm, m.sc.xn, m.Layers[i+1].c.rstd1
		}
		if err := l.forward(&p, &m.sc, &in, nil, a.hs[i+1], a.hs[i], lk); err != nil {
			return out, fmt.Errorf("llama: layer %d: %w", i, err)
		}
		if err := p.Notify(layerPath(i), false, a.hs[i+1]); err != nil {
			return out, err
		}
	}
	if L == 0 {
		if err := m.Norm.Forward(&p, a.xf, a.rstdF, a.hs[0]); err != nil {
			return out, fmt.Errorf("llama: norm: %w", err)
		}
	}
	if err := p.Notify("model.norm", false, a.xf); err != nil {
		return out, err
	}
	// With ForwardOptions.BackwardSeed the head's backward runs now, chunk by chunk, into a.dxf.
	count, err := m.Head.Run(&p, a.xf, a.dxf, batch.Labels, b, t, opts, &out)
	if err != nil {
		return out, fmt.Errorf("llama: lm_head (labels must lie in [0, %d) or be -100): %w", m.Config.VocabSize, err)
	}
	if batch.Labels == nil {
		return out, nil
	}
	m.last.count = count
	if opts.Train {
		m.last.pass, m.last.key, m.last.ready, m.last.in = p, m.shape, true, in
	}
	return out, nil
}

// Backward back-propagates the last training Forward with d(objective)/d(mean loss) = seed, accumulating (+=)
// into every trainable gradient. It consumes that Forward.
func (m *ForCausalLM) Backward(seed float32) (err error) {
	defer recoverError(&err)
	if !m.last.ready || m.last.key != m.shape {
		return fmt.Errorf("llama: Backward needs a preceding Forward with Train set and labels in the batch " +
			"(and no SetPolicy, Reserve or other Forward in between)")
	}
	m.last.ready = false
	p, in, a := m.last.pass, m.last.in, &m.act
	scale := float32(0)
	if m.last.count > 0 {
		scale = seed / float32(m.last.count)
	}
	if err := m.Head.Backward(&p, a.dxf, scale); err != nil {
		return fmt.Errorf("llama: lm_head backward: %w", err)
	}
	if err := p.Notify("model.norm", true, a.dxf); err != nil {
		return err
	}
	L := len(m.Layers)
	// grad = d(hs[L]), and its GEMM-dtype copy for the last layer's down_proj
	if err := m.Norm.ResidualBackward(&p, a.grad, m.sc.gh, a.dxf, a.hs[L], a.rstdF, false); err != nil {
		return fmt.Errorf("llama: norm backward: %w", err)
	}
	for i := L - 1; i >= 0; i-- {
		if err := p.Notify(layerPath(i), true, a.grad); err != nil {
			return err
		}
		if err := m.recompute(&p, &in, i); err != nil {
			return fmt.Errorf("llama: layer %d recomputation: %w", i, err)
		}
		if err := m.Layers[i].Backward(&p, &m.sc, &in, a.grad, a.hs[i]); err != nil {
			return fmt.Errorf("llama: layer %d backward: %w", i, err)
		}
	}
	if err := p.Notify("model.embed_tokens", true, a.grad); err != nil {
		return err
	}
	return m.embeddingBackward(a.grad)
}

// embeddingBackward scatters grad into the embedding's gradient. The padding row gets no gradient from the
// lookup (nn.Embedding's padding_idx), but keeps what a tied LM head gave it.
func (m *ForCausalLM) embeddingBackward(grad *tensor.Tensor) error {
	g := m.Embed.Grad
	if g == nil {
		return nil
	}
	pad, c := m.Config.PadTokenID, m.Config.HiddenSize
	var row *tensor.Tensor
	if pad >= 0 {
		var err error
		if row, err = g.View(pad*c, c); err != nil {
			return err
		}
		if err := m.Backend().Copy(m.act.padRow, row); err != nil {
			return err
		}
	}
	if err := m.Backend().EmbeddingBackward(g, m.act.ids, grad); err != nil {
		return fmt.Errorf("llama: embed_tokens backward: %w", err)
	}
	if row != nil {
		return m.Backend().Copy(row, m.act.padRow)
	}
	return nil
}

// layerPath is decoder layer i's module path, "model.layers.i".
func layerPath(i int) string { return "model.layers." + strconv.Itoa(i) }

func sqrtf(x float64) float64 { return math.Sqrt(x) }

// recoverError turns a panic inside the package (or a backend) into an error at the API boundary.
func recoverError(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("llama: internal error: %v", r)
	}
}

// ModelType returns config.json's model_type ("llama", "qwen2", ...): package lora picks PEFT's default
// target_modules by it.
func (m *ForCausalLM) ModelType() string { return m.Config.ModelType }
