package gpt2

import (
	"fmt"
	"math"
	"strconv"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// GPT2LMHeadModel is transformers' GPT2LMHeadModel: token (wte) and learned position (wpe) embeddings, L
// pre-LayerNorm blocks, a final LayerNorm and the language-model head, tied to wte unless
// tie_word_embeddings is false, with the shifted next-token cross-entropy (transformer.CausalLMHead). It
// implements transformer.Adaptable.
//
// Forward reads like the block diagram and Backward is the same list reversed. All FP32 master parameters
// live in two flat allocations (trainable with their gradients, and frozen); all activations live in a step
// arena carved per batch shape.
//
// Conv1D: transformers' GPT-2 projections (c_attn, c_proj, c_fc) are Conv1D modules whose weight is stored
// (in, out). Here they are transformer.Linear with the (out, in) weight of every other projection, so the
// GEMMs, LoRA and merging are the same code as BERT's; the transposition happens when a checkpoint is read
// or written (checkpoint.go), so files match transformers'. NamedParameters therefore reports these weights
// as (out, in).
type GPT2LMHeadModel struct {
	transformer.ModelCore // backend, policy and weight casts, flat parameter buffers, step arena

	Config Config                   // the configuration the model was built from
	WTE    *transformer.Param       // transformer.wte.weight (V, C)
	WPE    *transformer.Param       // transformer.wpe.weight (P, C)
	Blocks []*Block                 // transformer.h.0 … L−1
	LnF    *transformer.LayerNorm   // transformer.ln_f
	LMHead *transformer.Param       // lm_head.weight (V, C); nil when tied to WTE
	Head   transformer.CausalLMHead // lm_head and the shifted next-token loss, over WTE or LMHead

	shape carveKey
	act   activations
	sc    blockScratch
	last  lastForward
	// generation is the generation_config.json of the checkpoint the model was loaded from, written back by
	// Save; nil for a fresh model.
	generation []byte
	attn       transformer.AttnChoice
	ckpt       checkpointing
}

// carveKey identifies an arena layout: batch shape, GEMM dtype, and which optional inputs it holds.
type carveKey struct {
	b, t       int
	dt         tensor.DType
	mask, segs bool
	impl       string // attention implementation (transformer.AttnSDPA or AttnEager)
}

// activations are the model-level buffers of one pass (views of the step arena); N = B·T.
type activations struct {
	ids, pos *tensor.Tensor // (N) I32 token and position ids
	emb      *tensor.Tensor // (N, C) F32 wte[ids] + wpe[pos], then dropped out in place: block 0's input
	lnf      *tensor.Tensor // (N, C) h ln_f output, the head's input
	meanF    *tensor.Tensor // (N) F32
	rstdF    *tensor.Tensor // (N) F32
	g0       *tensor.Tensor // (N, C) F32 gradient of the hidden states
	dlnf     *tensor.Tensor // (N, C) F32 gradient of ln_f's output
	hLast    *tensor.Tensor // (N, C) F32 the last block's output, ln_f's input (not owned)
}

// lastForward records what Backward needs from the last training Forward.
type lastForward struct {
	pass    transformer.Pass
	key     carveKey
	ready   bool
	count   int
	embOff  uint64
	embUsed bool
}

// newModel allocates a GPT-2 for cfg on b with zero weights (LayerNorm weights 1) and packs its parameters.
// Callers initialise the weights (InitWeights, LoadPretrained).
func newModel(b tensor.Backend, cfg Config) (*GPT2LMHeadModel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &GPT2LMHeadModel{Config: cfg}
	m.InitCore(b, "gpt2", m.namedParameters, m.projectionSlots, m.reset)
	c, inter, eps := cfg.NEmbd, cfg.Inner(), float32(cfg.LayerNormEpsilon)
	var err error
	table := func(rows int) *transformer.Param {
		if err != nil {
			return nil
		}
		var t *tensor.Tensor
		if t, err = b.Alloc(tensor.F32, rows, c); err != nil {
			err = fmt.Errorf("gpt2: embedding table (%d, %d): %w", rows, c, err)
			return nil
		}
		return &transformer.Param{Value: t, Trainable: true}
	}
	lin := func(in, out int) transformer.Projection {
		if err != nil {
			return nil
		}
		var l *transformer.Linear
		l, err = transformer.NewLinear(b, in, out, true)
		return l
	}
	norm := func() *transformer.LayerNorm {
		if err != nil {
			return nil
		}
		var n *transformer.LayerNorm
		n, err = transformer.NewLayerNorm(b, c, eps)
		return n
	}
	m.WTE, m.WPE = table(cfg.VocabSize), table(cfg.NPositions)
	for i := range cfg.NLayer {
		scale := float32(1)
		if cfg.ScaleAttnWeights {
			scale = float32(1 / math.Sqrt(float64(cfg.HeadDim())))
		}
		if cfg.ScaleAttnByInverseLayerIdx {
			scale /= float32(i + 1)
		}
		m.Blocks = append(m.Blocks, &Block{
			Ln1: norm(), CAttn: lin(c, 3*c), CProj: lin(c, c), Ln2: norm(), CFc: lin(c, inter), MProj: lin(inter, c),
			Heads: cfg.NHead, Scale: scale, TanhGELU: cfg.tanhGELU(),
			AttnDrop: float32(cfg.AttnPdrop), ResidDrop: float32(cfg.ResidPdrop),
		})
	}
	m.LnF = norm()
	head := m.WTE
	if !cfg.TieWordEmbeddings {
		m.LMHead = table(cfg.VocabSize)
		head = m.LMHead
	}
	if err != nil {
		return nil, err
	}
	m.Head = transformer.CausalLMHead{Weight: head, V: cfg.VocabSize, C: c}
	if err := m.Pack(); err != nil {
		return nil, err
	}
	return m, nil
}

// reset drops the carved arena shape and any pending Backward (ModelCore's changed hook: a new policy, a
// re-pack after LoRA or SetTrainable).
func (m *GPT2LMHeadModel) reset() {
	m.shape = carveKey{}
	m.last.ready = false
}

// SetAttnImplementation chooses transformers' attn_implementation: "sdpa" (the default: the fused op, with the
// two-pass path taken when the backend does not cover the head size) or "eager" (always the two-pass path).
func (m *GPT2LMHeadModel) SetAttnImplementation(impl string) error {
	changed, err := m.attn.Set(impl)
	if changed {
		m.shape, m.last.ready = carveKey{}, false
	}
	return err
}

// AttnImplementation returns the implementation asked for and, when the last Forward fell back from sdpa to
// eager, the backend's reason.
func (m *GPT2LMHeadModel) AttnImplementation() (impl, fallback string) {
	return m.attn.Want(), m.attn.Fallback()
}

// carve lays out the step arena for key (a no-op when it already is).
func (m *GPT2LMHeadModel) carve(key carveKey) error {
	return transformer.CarveFor(m.Arena(), &m.shape, key, m.layout)
}

// layout takes every pass buffer of the model for key's batch shape and dtype.
func (m *GPT2LMHeadModel) layout(a *transformer.Arena, key carveKey) error {
	b, t, dt := key.b, key.t, key.dt
	n, c := b*t, m.Config.NEmbd
	m.act = activations{
		ids: a.Take(tensor.I32, n), pos: a.Take(tensor.I32, n), emb: a.Take(tensor.F32, n, c),
		lnf: a.Take(dt, n, c), meanF: a.Take(tensor.F32, n), rstdF: a.Take(tensor.F32, n),
		g0: a.Take(tensor.F32, n, c), dlnf: a.Take(tensor.F32, n, c),
	}
	m.sc = layoutScratch(a, b, t, c, m.Config.Inner(), dt)
	if key.impl == transformer.AttnEager {
		m.sc.eager = layoutEagerScratch(a, b, t, m.Config.NHead, dt)
	}
	if key.mask {
		m.sc.mask = a.Take(tensor.F32, b, t)
	}
	if key.segs {
		m.sc.segs = a.Take(tensor.I32, b, t)
	}
	m.layoutBlocks(a, key.impl, b, t, dt)
	m.Head.Layout(a, n, dt)
	return nil
}

// checkBatch validates a batch against the model: shape, token ids in [0, V), T ≤ n_positions, position ids
// in [0, n_positions).
func (m *GPT2LMHeadModel) checkBatch(batch *loaders.Batch) error {
	err := transformer.CheckBatchShape("gpt2", batch, func(b *loaders.Batch) []transformer.BatchArray {
		return []transformer.BatchArray{
			{Name: "InputIDs", Len: len(b.InputIDs)},
			{Name: "AttentionMask", Len: len(b.AttentionMask), Optional: true},
			{Name: "PositionIDs", Len: len(b.PositionIDs), Optional: true},
			{Name: "SegmentIDs", Len: len(b.SegmentIDs), Optional: true},
			{Name: "Labels", Len: len(b.Labels), Optional: true, Hint: " (a causal LM takes (B, T) labels)"},
			{Name: "Targets", Len: len(b.Targets), Refused: "a causal LM takes token labels, not regression Targets"},
		}
	})
	if err != nil {
		return err
	}
	if batch.PositionIDs == nil && batch.T > m.Config.NPositions {
		return fmt.Errorf("gpt2: sequence length %d exceeds n_positions %d", batch.T, m.Config.NPositions)
	}
	for i, id := range batch.InputIDs {
		if id < 0 || int(id) >= m.Config.VocabSize {
			return fmt.Errorf("gpt2: input id %d at (%d, %d) is outside the vocabulary [0, %d)", id, i/batch.T, i%batch.T, m.Config.VocabSize)
		}
	}
	for i, p := range batch.PositionIDs {
		if p < 0 || int(p) >= m.Config.NPositions {
			return fmt.Errorf("gpt2: position id %d at (%d, %d) is outside [0, n_positions = %d)", p, i/batch.T, i%batch.T, m.Config.NPositions)
		}
	}
	return nil
}

// hasPadding reports whether any attention-mask entry is 0.
func hasPadding(mask []int32) bool {
	for _, v := range mask {
		if v == 0 {
			return true
		}
	}
	return false
}

// upload copies the batch's ids, positions, key mask and segment ids to the device.
func (m *GPT2LMHeadModel) upload(batch *loaders.Batch) error {
	b, t := batch.B, batch.T
	if err := m.Backend().Upload(m.act.ids, batch.InputIDs); err != nil {
		return err
	}
	pos := batch.PositionIDs
	if pos == nil {
		pos = make([]int32, b*t)
		for i := range pos {
			pos[i] = int32(i % t)
		}
	}
	if err := m.Backend().Upload(m.act.pos, pos); err != nil {
		return err
	}
	if m.sc.mask != nil {
		mask := make([]float32, b*t)
		for i, v := range batch.AttentionMask {
			if v == 0 {
				mask[i] = transformer.MaskedScore
			}
		}
		if err := m.Backend().Upload(m.sc.mask, mask); err != nil {
			return err
		}
	}
	if m.sc.segs != nil {
		if err := m.Backend().Upload(m.sc.segs, batch.SegmentIDs); err != nil {
			return err
		}
	}
	if m.sc.eager.causal != nil {
		var pad []int32
		if hasPadding(batch.AttentionMask) {
			pad = batch.AttentionMask
		}
		return m.Backend().Upload(m.sc.eager.causal, causalMask(b, t, pad))
	}
	return nil
}

// Forward runs the model on batch: embeddings, blocks, ln_f, the head, and the shifted next-token loss when
// the batch has (B, T) labels. With opts.Train it applies dropout from (opts.Seed, opts.Offset) and keeps the
// activations for Backward. With opts.HostLogits, Output.Logits holds the (B, T, V) logits in FP32 (the GEMM
// dtype's values); Output.Device is nil (the head runs chunk by chunk). Output.Loss is the summed loss over
// the supervised targets divided by their count (Supervised), NaN without labels.
func (m *GPT2LMHeadModel) Forward(batch *loaders.Batch, opts transformer.ForwardOptions) (out transformer.Output, err error) {
	defer recoverError(&err)
	m.last.ready = false
	if err := m.checkBatch(batch); err != nil {
		return out, err
	}
	b, t := batch.B, batch.T
	key := carveKey{b: b, t: t, dt: m.Policy().GemmDType(), mask: hasPadding(batch.AttentionMask), segs: batch.SegmentIDs != nil}
	if key.impl, err = m.attn.Resolve(m.Backend(), m.Config.NHead, m.Config.HeadDim(), t, key.dt, float32(m.Config.AttnPdrop)); err != nil {
		return out, err
	}
	if key.impl == transformer.AttnEager && key.segs {
		return out, fmt.Errorf("gpt2: packed rows (segment ids) need the fused attention op; attn_implementation %q has no segment mask", transformer.AttnEager)
	}
	if err := m.carve(key); err != nil {
		return out, err
	}
	if err := m.upload(batch); err != nil {
		return out, err
	}
	p := m.NewPass(opts)
	bk, a := m.Backend(), &m.act
	// transformer.wte(ids) + transformer.wpe(pos), then transformer.drop: F32 (embeddings are not autocast).
	if err := bk.Embedding(a.emb, a.ids, m.WTE.Value); err != nil {
		return out, fmt.Errorf("gpt2: wte: %w", err)
	}
	if err := bk.Embedding(a.g0, a.pos, m.WPE.Value); err != nil { // g0 is free until Backward
		return out, fmt.Errorf("gpt2: wpe: %w", err)
	}
	if err := bk.Add(a.emb, a.emb, a.g0); err != nil {
		return out, err
	}
	embP := float32(m.Config.EmbdPdrop)
	embUsed, embOff := p.DropoutActive(embP), uint64(0)
	if embUsed {
		if embOff, err = p.Dropout(a.emb, a.emb, embP); err != nil {
			return out, err
		}
	}
	if err := p.Notify("transformer.drop", false, a.emb); err != nil {
		return out, err
	}
	h := a.emb
	m.ckpt.offs = m.ckpt.offs[:0]
	for i, k := range m.Blocks {
		m.ckpt.offs = append(m.ckpt.offs, p.Offset)
		if h, err = k.Forward(&p, &m.sc, h); err != nil {
			return out, fmt.Errorf("gpt2: block %d: %w", i, err)
		}
		if err := p.Notify(blockPath(i), false, h); err != nil {
			return out, err
		}
	}
	a.hLast = h
	if err := m.LnF.Forward(&p, a.lnf, a.meanF, a.rstdF, h); err != nil {
		return out, fmt.Errorf("gpt2: ln_f: %w", err)
	}
	if err := p.Notify("transformer.ln_f", false, a.lnf); err != nil {
		return out, err
	}
	// With ForwardOptions.BackwardSeed the head's backward runs now, chunk by chunk, into a.dlnf.
	count, err := m.Head.Run(&p, a.lnf, a.dlnf, batch.Labels, b, t, opts, &out)
	if err != nil {
		return out, fmt.Errorf("gpt2: lm_head: %w", err)
	}
	if opts.Train && batch.Labels != nil {
		m.last = lastForward{pass: p, key: m.shape, ready: true, count: count, embOff: embOff, embUsed: embUsed}
	}
	return out, nil
}

// Supervised returns the next-token targets of b that enter the loss: labels[:, 1:] ≠ −100.
func (m *GPT2LMHeadModel) Supervised(b *loaders.Batch) int {
	return transformer.SupervisedTargets(b.Labels, b.T)
}

// Backward back-propagates the last training Forward with d(objective)/d(mean loss) = seed, accumulating (+=)
// into the gradient of every trainable parameter. It consumes that Forward: a second call is an error.
func (m *GPT2LMHeadModel) Backward(seed float32) (err error) {
	defer recoverError(&err)
	if !m.last.ready || m.last.key != m.shape {
		return fmt.Errorf("gpt2: Backward needs a preceding Forward with Train set and labels in the batch " +
			"(and no SetPolicy or other Forward in between)")
	}
	m.last.ready = false
	p := m.last.pass
	bk, a := m.Backend(), &m.act
	scale := float32(0)
	if m.last.count > 0 {
		scale = seed / float32(m.last.count)
	}
	if err := m.Head.Backward(&p, a.dlnf, scale); err != nil {
		return fmt.Errorf("gpt2: lm_head backward: %w", err)
	}
	if err := p.Notify("transformer.ln_f", true, a.dlnf); err != nil {
		return err
	}
	grad := a.g0
	if err := m.LnF.Backward(&p, grad, a.dlnf, a.hLast, a.meanF, a.rstdF); err != nil {
		return fmt.Errorf("gpt2: ln_f backward: %w", err)
	}
	for i := len(m.Blocks) - 1; i >= 0; i-- {
		if err := p.Notify(blockPath(i), true, grad); err != nil {
			return err
		}
		if err := m.recompute(&p, i); err != nil {
			return fmt.Errorf("gpt2: block %d recomputation: %w", i, err)
		}
		if err := m.Blocks[i].Backward(&p, &m.sc, grad); err != nil {
			return fmt.Errorf("gpt2: block %d backward: %w", i, err)
		}
	}
	if err := p.Notify("transformer.drop", true, grad); err != nil {
		return err
	}
	if m.last.embUsed {
		if err := bk.DropoutBackward(grad, grad, float32(m.Config.EmbdPdrop), p.Seed, m.last.embOff); err != nil {
			return err
		}
	}
	if g := m.WPE.Grad; g != nil {
		if err := bk.EmbeddingBackward(g, a.pos, grad); err != nil {
			return fmt.Errorf("gpt2: wpe backward: %w", err)
		}
	}
	if g := m.WTE.Grad; g != nil {
		if err := bk.EmbeddingBackward(g, a.ids, grad); err != nil {
			return fmt.Errorf("gpt2: wte backward: %w", err)
		}
	}
	return nil
}

// blockPath is block i's module path, "transformer.h.i".
func blockPath(i int) string { return "transformer.h." + strconv.Itoa(i) }

// recoverError turns a panic inside the package (or a backend) into an error at the API boundary.
func recoverError(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("gpt2: internal error: %v", r)
	}
}
