package bert

import (
	"fmt"
	"github.com/tune-ml/tune/transformer"

	"github.com/tune-ml/tune/tensor"
)

// Embeddings is BertEmbeddings (transformers/models/bert/modeling_bert.py): word + token type + absolute position embeddings, summed in that
// order, then LayerNorm and dropout. Every buffer is F32 under every policy: the tables are FP32 masters and an
// embedding lookup keeps its table's dtype under autocast (aten/src/ATen/autocast_mode.cpp).
type Embeddings struct {
	Word      *transformer.Param     // (V, C) word_embeddings.weight
	Position  *transformer.Param     // (P, C) position_embeddings.weight, P = max_position_embeddings
	TokenType *transformer.Param     // (2, C) token_type_embeddings.weight
	Norm      *transformer.LayerNorm // embeddings.LayerNorm (C), eps layer_norm_eps
	Dropout   float32                // hidden_dropout_prob, applied after Norm
	// PadID is the word embedding's padding_idx: like torch.nn.Embedding(padding_idx=...), its row gets no
	// gradient (it is zeroed after every backward, which equals never accumulating into it).
	PadID int

	c embeddingsCache
}

// embeddingsCache holds the activations of one pass (views of the step arena).
type embeddingsCache struct {
	sum      *tensor.Tensor // (N, C) F32 word + type + position, the transformer.LayerNorm input (kept when trained)
	tmp      *tensor.Tensor // (N, C) F32 one looked-up table at a time; in backward the gradient of sum
	normed   *tensor.Tensor // (N, C) F32 transformer.LayerNorm output, the dropout's input when it drops
	mean     *tensor.Tensor // (N) F32
	rstd     *tensor.Tensor // (N) F32
	dropped  *tensor.Tensor // (N, C) F32 the output (the dropout's, or the LayerNorm's when none drops); nil without dropout
	dropOff  uint64
	dropUsed bool
	train    bool // some parameter of the embeddings trains: Backward runs (layout time)
}

// Parameters lists the embeddings' parameters as BertEmbeddings names them.
func (e *Embeddings) Parameters() []transformer.NamedParameter {
	return []transformer.NamedParameter{
		{Name: "word_embeddings.weight", Param: e.Word},
		{Name: "position_embeddings.weight", Param: e.Position},
		{Name: "token_type_embeddings.weight", Param: e.TokenType},
		{Name: "LayerNorm.weight", Param: e.Norm.Weight},
		{Name: "LayerNorm.bias", Param: e.Norm.Bias},
	}
}

// layout takes the pass buffers for n = B·T tokens of width c. g0 and g1 are (N, C) F32 gradient buffers the
// model uses only in backward: the forward's scratch lives there (the looked-up tables, the LayerNorm output
// that the dropout reads), and the LayerNorm input too when no parameter of the embeddings trains (frozen, as
// with LoRA: Backward has nothing to do, and the input is read by no one). Only the output stays (and the
// LayerNorm input while it is trained).
func (e *Embeddings) layout(a *transformer.Arena, n, c int, g0, g1 *tensor.Tensor) {
	e.c = embeddingsCache{sum: g0, tmp: g1, normed: g1, mean: a.Take(tensor.F32, n), rstd: a.Take(tensor.F32, n)}
	for _, np := range e.Parameters() {
		e.c.train = e.c.train || np.Param.Grad != nil
	}
	if e.c.train {
		e.c.sum = a.Take(tensor.F32, n, c)
	}
	if e.Dropout > 0 {
		e.c.dropped = a.Take(tensor.F32, n, c)
	} else {
		e.c.normed = a.Take(tensor.F32, n, c)
	}
}

// Forward embeds ids, typeIDs and posIDs (N) I32 and returns the (N, C) F32 hidden states (a view owned by the
// cache, valid until the next Forward).
func (e *Embeddings) Forward(p *transformer.Pass, ids, typeIDs, posIDs *tensor.Tensor) (*tensor.Tensor, error) {
	b, c := p.Backend, &e.c
	if err := b.Embedding(c.sum, ids, e.Word.Value); err != nil {
		return nil, fmt.Errorf("word embeddings: %w", err)
	}
	if err := b.Embedding(c.tmp, typeIDs, e.TokenType.Value); err != nil {
		return nil, fmt.Errorf("token type embeddings (type_vocab_size %d): %w", e.TokenType.Value.Shape[0], err)
	}
	if err := b.Add(c.sum, c.sum, c.tmp); err != nil {
		return nil, err
	}
	if err := b.Embedding(c.tmp, posIDs, e.Position.Value); err != nil {
		return nil, fmt.Errorf("position embeddings: %w", err)
	}
	if err := b.Add(c.sum, c.sum, c.tmp); err != nil {
		return nil, err
	}
	c.dropUsed = p.DropoutActive(e.Dropout)
	out := c.normed
	if c.dropped != nil && !c.dropUsed { // normed is scratch: the LayerNorm writes the output itself
		out = c.dropped
	}
	if err := e.Norm.Forward(p, out, c.mean, c.rstd, c.sum); err != nil {
		return nil, err
	}
	if !c.dropUsed {
		return out, nil
	}
	var err error
	c.dropOff, err = p.Dropout(c.dropped, c.normed, e.Dropout)
	return c.dropped, err
}

// Backward consumes dout (N, C) F32, the gradient of Forward's output (overwritten: it is used as scratch), and
// accumulates (+=) the gradients of the trainable tables and LayerNorm parameters; with none trainable it does
// nothing. The g1 of layout must not hold anything Backward's caller still needs.
func (e *Embeddings) Backward(p *transformer.Pass, dout, ids, typeIDs, posIDs *tensor.Tensor) error {
	b, c := p.Backend, &e.c
	if !c.train { // every parameter frozen: no gradient to form (and the LayerNorm input was not kept)
		return nil
	}
	if c.dropUsed {
		if err := b.DropoutBackward(dout, dout, e.Dropout, p.Seed, c.dropOff); err != nil {
			return err
		}
	}
	dsum := c.tmp // (N, C) F32
	if err := e.Norm.Backward(p, dsum, dout, c.sum, c.mean, c.rstd); err != nil {
		return err
	}
	if g := e.Word.Grad; g != nil {
		if err := b.EmbeddingBackward(g, ids, dsum); err != nil {
			return err
		}
		if e.PadID >= 0 && e.PadID < g.Shape[0] {
			row, err := g.View(e.PadID*g.Shape[1], g.Shape[1])
			if err != nil {
				return err
			}
			if err := b.Fill(row, 0); err != nil {
				return err
			}
		}
	}
	if g := e.TokenType.Grad; g != nil {
		if err := b.EmbeddingBackward(g, typeIDs, dsum); err != nil {
			return err
		}
	}
	if g := e.Position.Grad; g != nil {
		return b.EmbeddingBackward(g, posIDs, dsum)
	}
	return nil
}
