package bert

import (
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// Pooler is BertPooler: pooled = tanh(dense(h[:, 0])), the first token's hidden state of each sequence.
// The dense layer is GEMM-class and tanh keeps its dtype, so under autocast pooled is half (aten/src/ATen/autocast_mode.cpp).
type Pooler struct {
	Dense transformer.Projection // pooler.dense (C → C)

	c poolerCache
}

type poolerCache struct {
	first  *tensor.Tensor // (B, C) h rows h[:, 0] gathered (and cast) from the encoder output
	pooled *tensor.Tensor // (B, C) h tanh output
	rows   *tensor.Tensor // (B) I32 row index b·T of each first token in the (B·T, C) hidden states
	dfirst *tensor.Tensor // (B, C) F32 gradient of the gathered rows
}

func (pl *Pooler) layout(a *transformer.Arena, b, c int, dt tensor.DType) {
	pl.c = poolerCache{
		first: a.Take(dt, b, c), pooled: a.Take(dt, b, c), rows: a.Take(tensor.I32, b),
		dfirst: a.Take(tensor.F32, b, c),
	}
	pl.Dense.Layout(a, b, dt)
}

// Forward gathers h[:, 0] from hidden (B·T, C) F32 with the row index uploaded into c.rows (an Embedding
// lookup into the hidden states, which also casts to the GEMM dtype) and returns pooled (B, C) h.
func (pl *Pooler) Forward(p *transformer.Pass, hidden *tensor.Tensor) (*tensor.Tensor, error) {
	c := &pl.c
	if err := p.Backend.Embedding(c.first, c.rows, hidden); err != nil {
		return nil, err
	}
	if err := pl.Dense.Forward(p, c.pooled, c.first); err != nil {
		return nil, err
	}
	return c.pooled, p.Backend.Tanh(c.pooled, c.pooled)
}

// Backward takes dpooled (B, C) h (clobbered) and writes the gradient of the encoder output into dhidden
// (B·T, C) F32 (overwritten: zero except the first token of each sequence).
func (pl *Pooler) Backward(p *transformer.Pass, dhidden, dpooled *tensor.Tensor) error {
	bk, c := p.Backend, &pl.c
	if err := bk.TanhBackward(dpooled, dpooled, c.pooled); err != nil {
		return err
	}
	if err := pl.Dense.Backward(p, c.dfirst, dpooled, c.first, false); err != nil {
		return err
	}
	if err := bk.Fill(dhidden, 0); err != nil {
		return err
	}
	return bk.EmbeddingBackward(dhidden, c.rows, c.dfirst)
}

// ClassificationHead is BertForSequenceClassification's head on the pooled output: logits =
// classifier(dropout(pooled)), with the classifier GEMM-class (half logits under autocast).
type ClassificationHead struct {
	Classifier transformer.Projection // classifier (C → L)
	Dropout    float32                // classifier_dropout, else hidden_dropout_prob

	c headCache
}

type headCache struct {
	dropped  *tensor.Tensor // (B, C) h dropout(pooled); unused when dropout is off
	in       *tensor.Tensor // the classifier's input in the last Forward (dropped or pooled)
	logits   *tensor.Tensor // (B, L) h
	dlogits  *tensor.Tensor // (B, L) h
	dpooled  *tensor.Tensor // (B, C) h
	dropOff  uint64
	dropUsed bool
}

func (hd *ClassificationHead) layout(a *transformer.Arena, b, c, labels int, dt tensor.DType) {
	hd.c = headCache{
		logits: a.Take(dt, b, labels), dlogits: a.Take(dt, b, labels), dpooled: a.Take(dt, b, c),
	}
	if hd.Dropout > 0 {
		hd.c.dropped = a.Take(dt, b, c)
	}
	hd.Classifier.Layout(a, b, dt)
}

// Forward returns logits (B, L) h from pooled (B, C) h.
func (hd *ClassificationHead) Forward(p *transformer.Pass, pooled *tensor.Tensor) (*tensor.Tensor, error) {
	c := &hd.c
	c.in = pooled
	if c.dropUsed = p.DropoutActive(hd.Dropout); c.dropUsed {
		var err error
		if c.dropOff, err = p.Dropout(c.dropped, pooled, hd.Dropout); err != nil {
			return nil, err
		}
		c.in = c.dropped
	}
	return c.logits, hd.Classifier.Forward(p, c.logits, c.in)
}

// Backward takes the gradient of the logits in c.dlogits and returns the gradient of pooled (B, C) h.
func (hd *ClassificationHead) Backward(p *transformer.Pass) (*tensor.Tensor, error) {
	c := &hd.c
	if err := hd.Classifier.Backward(p, c.dpooled, c.dlogits, c.in, false); err != nil {
		return nil, err
	}
	if c.dropUsed {
		if err := p.Backend.DropoutBackward(c.dpooled, c.dpooled, hd.Dropout, p.Seed, c.dropOff); err != nil {
			return nil, err
		}
	}
	return c.dpooled, nil
}
