package bert

import (
	"fmt"
	"github.com/tune-ml/tune/transformer"
	"math"
	"strconv"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// BertForSequenceClassification is transformers' BertForSequenceClassification: a BERT encoder, the pooler, and
// a dropout + Linear classifier over the pooled first token, with the loss transformers chooses from
// problem_type / num_labels (mean cross-entropy for integer labels, MSE for regression). It implements
// trainer.Model and trainer.Loader.
//
// Forward reads like the block diagram — embeddings, L layers, pooler, head — and Backward is the same list
// reversed. All FP32 master parameters live in two flat allocations (trainable with their gradients, and
// frozen); all activations live in a step arena carved per batch shape.
type BertForSequenceClassification struct {
	Config     BertConfig           // the configuration the model was built from (ID2Label and ProblemType included)
	Embeddings *Embeddings          // bert.embeddings
	Layers     []*transformer.Layer // bert.encoder.layer.0 … L−1
	Pooler     *Pooler              // bert.pooler: tanh(dense(h[:, 0]))
	Head       *ClassificationHead  // dropout, then classifier (C → L)

	transformer.ModelCore

	shape  carveKey // the shape the arena views are carved for
	act    activations
	sc     transformer.LayerScratch
	host   hostBuffers
	last   lastForward
	hfBase *loaders.BertConfig    // the config.json read by LoadPretrained (its unknown keys are saved back); nil for a fresh model
	attn   transformer.AttnChoice // the attention implementation asked for and what the backend covers
	ckpt   bool                   // gradient checkpointing (SetGradientCheckpointing)
}

// carveKey identifies an arena layout: batch shape, GEMM dtype and attention implementation.
type carveKey struct {
	b, t int
	dt   tensor.DType
	impl string
}

// activations are the model-level buffers of one pass (views of the step arena); N = B·T.
type activations struct {
	ids, types, pos *tensor.Tensor // (N) I32 token, token type and position ids
	mask            *tensor.Tensor // (B, T) F32 additive attention mask: 0 or transformer.MaskedScore
	labels          *tensor.Tensor // (B) I64 class labels (−100: ignored)
	targets         *tensor.Tensor // (B) F32 regression targets
	losses          *tensor.Tensor // (B) F32 per-row losses
	g0, g1          *tensor.Tensor // (N, C) F32 ping-pong gradients of the hidden states (forward scratch of the embeddings)
}

// hostBuffers are reused host-side staging slices (grown, never shrunk).
type hostBuffers struct {
	types, pos, rows []int32
	mask, losses     []float32
}

// lastForward records what Backward needs from the last training Forward.
type lastForward struct {
	pass    transformer.Pass
	key     carveKey
	ready   bool   // a training Forward with labels ran and Backward has not consumed it
	problem string // SingleLabel or Regression
	count   int    // labelled rows (the mean's denominator)
}

// newBert allocates a model for cfg on b with zero weights (LayerNorm weights 1) and packs its parameters.
// Callers initialise the weights (InitWeights, LoadPretrained).
func newBert(b tensor.Backend, cfg BertConfig) (*BertForSequenceClassification, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkHostMemory(b, cfg); err != nil {
		return nil, err
	}
	m := &BertForSequenceClassification{Config: cfg}
	m.InitCore(b, "transformer", m.namedParameters, m.projectionSlots, m.reset)
	m.SetStacks(m.qkvStacks)
	c, inter := cfg.HiddenSize, cfg.IntermediateSize
	table := func(rows int) (*transformer.Param, error) {
		t, err := b.Alloc(tensor.F32, rows, c)
		if err != nil {
			return nil, fmt.Errorf("transformer: embedding table (%d, %d): %w", rows, c, err)
		}
		return &transformer.Param{Value: t, Trainable: true}, nil
	}
	var err error
	e := &Embeddings{Dropout: float32(cfg.HiddenDropoutProb), PadID: cfg.PadTokenID}
	if e.Word, err = table(cfg.VocabSize); err != nil {
		return nil, err
	}
	if e.Position, err = table(cfg.MaxPositionEmbeddings); err != nil {
		return nil, err
	}
	if e.TokenType, err = table(cfg.TypeVocabSize); err != nil {
		return nil, err
	}
	if e.Norm, err = transformer.NewLayerNorm(b, c, float32(cfg.LayerNormEps)); err != nil {
		return nil, err
	}
	m.Embeddings = e
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
		n, err = transformer.NewLayerNorm(b, c, float32(cfg.LayerNormEps))
		return n
	}
	for range cfg.NumHiddenLayers {
		l := &transformer.Layer{
			Attention: transformer.SelfAttention{
				Query: lin(c, c), Key: lin(c, c), Value: lin(c, c),
				Heads: cfg.NumAttentionHeads, HeadDim: cfg.HeadDim(), Dropout: float32(cfg.AttentionProbsDropoutProb),
			},
			AttnOut: lin(c, c), AttnNorm: norm(), Intermediate: lin(c, inter), Output: lin(inter, c), OutNorm: norm(),
			HiddenDropout: float32(cfg.HiddenDropoutProb),
		}
		m.Layers = append(m.Layers, l)
	}
	m.Pooler = &Pooler{Dense: lin(c, c)}
	m.Head = &ClassificationHead{Classifier: lin(c, cfg.NumLabels()), Dropout: float32(cfg.ClassifierDropoutProb())}
	if err != nil {
		return nil, err
	}
	if err := m.Pack(); err != nil {
		return nil, err
	}
	return m, nil
}

// reset drops the carved arena shape and any pending Backward (ModelCore's changed hook: a new policy, a
// re-pack that may have put new projections with their own pass buffers in place).
func (m *BertForSequenceClassification) reset() {
	m.last.ready = false
	m.shape = carveKey{}
}

// Reserve sizes the step arena for batches up to b × t tokens, so that training allocates nothing after it.
func (m *BertForSequenceClassification) Reserve(b, t int) error {
	return m.carve(b, t)
}

// carve lays out the step arena for a (b, t) batch under the current policy (a no-op when it already is).
func (m *BertForSequenceClassification) carve(b, t int) error {
	dt := m.Policy().GemmDType()
	impl, err := m.attn.Resolve(m.Backend(), m.Config.NumAttentionHeads, m.Config.HeadDim(), t, dt, float32(m.Config.AttentionProbsDropoutProb))
	if err != nil {
		return err
	}
	key := carveKey{b, t, dt, impl}
	return transformer.CarveFor(m.Arena(), &m.shape, key, m.layout)
}

// layout takes every pass buffer of the model for key's batch shape and dtype.
func (m *BertForSequenceClassification) layout(a *transformer.Arena, key carveKey) error {
	b, t, dt := key.b, key.t, key.dt
	n, c := b*t, m.Config.HiddenSize
	m.act = activations{
		ids: a.Take(tensor.I32, n), types: a.Take(tensor.I32, n), pos: a.Take(tensor.I32, n),
		mask: a.Take(tensor.F32, b, t), labels: a.Take(tensor.I64, b), targets: a.Take(tensor.F32, b),
		losses: a.Take(tensor.F32, b),
	}
	m.sc = transformer.LayoutLayerScratch(a, key.impl, b, t, c, m.Config.IntermediateSize, m.Config.NumAttentionHeads, dt)
	// The gradients are the layers' alternating outputs under autocast, dead once the pooler has read the last
	// one (with checkpointing they are kept layer outputs, and under FP32 there are none).
	if m.act.g0, m.act.g1 = m.sc.AlternateOutputs(); m.ckpt || m.act.g0 == nil {
		m.act.g0, m.act.g1 = a.Take(tensor.F32, n, c), a.Take(tensor.F32, n, c)
	}
	m.Embeddings.layout(a, n, c, m.act.g0, m.act.g1)
	transformer.LayoutLayers(a, &m.sc, m.Layers, m.ckpt, key.impl, b, t, dt)
	m.Pooler.layout(a, b, c, dt)
	m.Head.layout(a, b, c, m.Config.NumLabels(), dt)
	return nil
}

// Forward runs the model on batch: embeddings, encoder layers, pooler, classifier, and the loss when the batch
// has labels (Labels for classification, Targets for regression). With opts.Train it applies dropout from
// (opts.Seed, opts.Offset) and keeps the activations for Backward. Output.Device holds the logits (B, L) in the
// GEMM dtype; with opts.HostLogits, Output.Logits holds them in FP32 (rounded to the autocast dtype first under
// autocast, as transformers' logits are). Output.Loss is the mean loss, NaN without labels.
func (m *BertForSequenceClassification) Forward(batch *loaders.Batch, opts transformer.ForwardOptions) (out transformer.Output, err error) {
	defer recoverError(&err)
	m.last.ready = false
	if err := m.checkBatch(batch); err != nil {
		return out, err
	}
	b, t := batch.B, batch.T
	if err := m.carve(b, t); err != nil {
		return out, err
	}
	if err := m.upload(batch); err != nil {
		return out, err
	}
	p := m.NewPass(opts)

	h, err := m.Embeddings.Forward(&p, m.act.ids, m.act.types, m.act.pos) // (N, C) F32
	if err != nil {
		return out, fmt.Errorf("transformer: embeddings: %w", err)
	}
	if err := p.Notify("bert.embeddings", false, h); err != nil {
		return out, err
	}
	for i, l := range m.Layers {
		if h, err = l.Forward(&p, &m.sc, h, m.act.mask, b, t); err != nil {
			return out, fmt.Errorf("transformer: encoder layer %d: %w", i, err)
		}
		if err := p.Notify(layerPath(i), false, h); err != nil {
			return out, err
		}
	}
	pooled, err := m.Pooler.Forward(&p, h) // (B, C) h
	if err != nil {
		return out, fmt.Errorf("transformer: pooler: %w", err)
	}
	if err := p.Notify("bert.pooler", false, pooled); err != nil {
		return out, err
	}
	logits, err := m.Head.Forward(&p, pooled) // (B, L) h
	if err != nil {
		return out, fmt.Errorf("transformer: classifier: %w", err)
	}
	if err := p.Notify("classifier", false, logits); err != nil {
		return out, err
	}
	out.NumLabels, out.Device = m.Config.NumLabels(), logits
	if opts.HostLogits {
		out.Logits = make([]float32, b*out.NumLabels)
		if err := m.Backend().Download(out.Logits, logits); err != nil {
			return out, fmt.Errorf("transformer: reading logits: %w", err)
		}
	}
	out.Loss = float32(math.NaN())
	if batch.Labels == nil && batch.Targets == nil {
		return out, nil
	}
	if !opts.Train && batch.Targets == nil && batch.NumLabelled() == 0 {
		// No labelled row (a prediction file's batch: every label −100): no loss, as PyTorch's mean over no
		// element is NaN. A regression model would otherwise refuse integer Labels (tester4: tune predict could
		// not run one).
		return out, nil
	}
	if out.Loss, err = m.loss(batch, opts.DeferLoss); err != nil {
		return out, err
	}
	if opts.DeferLoss {
		out.LossRows, out.LossCount = m.act.losses, m.last.count
	}
	if opts.Train {
		m.last.pass, m.last.key, m.last.ready = p, m.shape, true
	}
	return out, nil
}

// Supervised returns the batch's labelled rows (label ≠ −100; every row of a regression batch): the denominator
// of its mean loss.
func (m *BertForSequenceClassification) Supervised(b *loaders.Batch) int { return b.NumLabelled() }

// Backward back-propagates the last training Forward with d(objective)/d(mean loss) = seed, accumulating (+=)
// into the gradient of every trainable parameter. It consumes that Forward: a second call is an error.
func (m *BertForSequenceClassification) Backward(seed float32) (err error) {
	defer recoverError(&err)
	if !m.last.ready || m.last.key != m.shape {
		return fmt.Errorf("transformer: Backward needs a preceding Forward with Train set and labels in the batch " +
			"(and no SetPolicy, Reserve or other Forward in between)")
	}
	m.last.ready = false
	p := m.last.pass
	b, t := m.shape.b, m.shape.t
	if err := m.lossBackward(&p, seed); err != nil {
		return err
	}
	if err := p.Notify("classifier", true, m.Head.c.dlogits); err != nil {
		return err
	}
	dpooled, err := m.Head.Backward(&p)
	if err != nil {
		return fmt.Errorf("transformer: classifier backward: %w", err)
	}
	if err := p.Notify("bert.pooler", true, dpooled); err != nil {
		return err
	}
	grad := m.act.g0 // (N, C) F32
	if err := m.Pooler.Backward(&p, grad, dpooled); err != nil {
		return fmt.Errorf("transformer: pooler backward: %w", err)
	}
	for i := len(m.Layers) - 1; i >= 0; i-- {
		if err := p.Notify(layerPath(i), true, grad); err != nil {
			return err
		}
		if m.ckpt && i < len(m.Layers)-1 { // the last layer's activations are still in the shared region
			if err := m.Layers[i].Recompute(&p, &m.sc, b, t); err != nil {
				return fmt.Errorf("transformer: encoder layer %d recomputation: %w", i, err)
			}
		}
		// Over frozen embeddings no one reads the first layer's input gradient (Embeddings.Backward returns),
		// unless an observer is shown it.
		inputGrad := i > 0 || m.Embeddings.c.train || p.Observe != nil
		if err := m.Layers[i].Backward(&p, &m.sc, grad, m.act.g1, b, t, inputGrad); err != nil {
			return fmt.Errorf("transformer: encoder layer %d backward: %w", i, err)
		}
	}
	if err := p.Notify("bert.embeddings", true, grad); err != nil {
		return err
	}
	if err := m.Embeddings.Backward(&p, grad, m.act.ids, m.act.types, m.act.pos); err != nil {
		return fmt.Errorf("transformer: embeddings backward: %w", err)
	}
	return nil
}

// layerPath is encoder layer i's module path, "bert.encoder.layer.i".
func layerPath(i int) string { return "bert.encoder.layer." + strconv.Itoa(i) }

// recoverError turns a panic inside the package (or a backend) into an error at the API boundary.
func recoverError(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("transformer: internal error: %v", r)
	}
}
