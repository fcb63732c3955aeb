package loaders

import (
	"fmt"
	"sync"
)

// CollatorOptions configures a Collator.
type CollatorOptions struct {
	// MaxLength truncates each example to at most this many tokens, special tokens included (0: no limit).
	// Use the model's max_position_embeddings (512 for BERT) or less.
	MaxLength int
	// Truncation is the strategy for sentence pairs (LongestFirst, transformers' truncation=True).
	Truncation TruncationStrategy
	// PadToMultipleOf rounds each batch's length T up to a multiple (8 suits Tensor Cores); 0 or 1: off.
	PadToMultipleOf int
	// Cache keeps each example's encoding after its first use, so later epochs skip tokenization.
	Cache bool
}

// Collator turns examples of a Dataset into padded Batches, as transformers' DataCollatorWithPadding does:
// each example is tokenized (and truncated) on its own, then the batch is padded on the right to its longest
// example (dynamic padding), rounded up to PadToMultipleOf. It is safe for concurrent use.
type Collator struct {
	tok  *Tokenizer
	ds   *Dataset
	opts CollatorOptions

	mu    sync.Mutex
	cache []*Encoding // by example index, when opts.Cache
}

// NewCollator returns a collator for ds; it checks that the tokenizer can pad.
func NewCollator(tok *Tokenizer, ds *Dataset, opts CollatorOptions) (*Collator, error) {
	if tok == nil || ds == nil {
		return nil, fmt.Errorf("loaders: NewCollator needs a tokenizer and a dataset")
	}
	if _, ok := tok.PadID(); !ok {
		return nil, tok.noPadError() // the collator pads batches
	}
	if opts.MaxLength < 0 || opts.PadToMultipleOf < 0 {
		return nil, fmt.Errorf("loaders: collator max_length %d and pad_to_multiple_of %d must be >= 0", opts.MaxLength, opts.PadToMultipleOf)
	}
	c := &Collator{tok: tok, ds: ds, opts: opts}
	if opts.Cache {
		c.cache = make([]*Encoding, ds.Len())
	}
	return c, nil
}

// encode returns example i's encoding (unpadded), from the cache when enabled.
func (c *Collator) encode(i int) (*Encoding, error) {
	if i < 0 || i >= c.ds.Len() {
		return nil, fmt.Errorf("loaders: example index %d out of range [0, %d)", i, c.ds.Len())
	}
	if c.cache != nil {
		c.mu.Lock()
		e := c.cache[i]
		c.mu.Unlock()
		if e != nil {
			return e, nil
		}
	}
	ex := c.ds.Examples[i]
	opts := EncodeOptions{MaxLength: c.opts.MaxLength, Truncation: c.opts.Truncation}
	var e *Encoding
	var err error
	if ex.Pair != nil {
		e, err = c.tok.EncodePair(ex.Text, *ex.Pair, opts)
	} else {
		e, err = c.tok.Encode(ex.Text, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("loaders: %s:%d: %w", c.ds.Path, ex.Line, err)
	}
	if c.cache != nil {
		c.mu.Lock()
		c.cache[i] = e
		c.mu.Unlock()
	}
	return e, nil
}

// Lengths returns every example's token count after truncation (the lengths group_by_length sorts by).
func (c *Collator) Lengths() ([]int, error) {
	out := make([]int, c.ds.Len())
	for i := range out {
		e, err := c.encode(i)
		if err != nil {
			return nil, err
		}
		out[i] = e.Len()
	}
	return out, nil
}

// Collate builds the batch of the examples at indices: InputIDs, TokenTypeIDs and AttentionMask of shape
// (B, T) with T the longest example rounded up to PadToMultipleOf, padded on the right with the pad id, type
// id pad_type_id and mask 0; Labels (B) holds class ids (IgnoreLabel for unlabelled rows), or Targets (B)
// the regression targets when the dataset is a regression one.
func (c *Collator) Collate(indices []int) (*Batch, error) {
	if len(indices) == 0 {
		return nil, fmt.Errorf("loaders: Collate needs at least one example")
	}
	encs := make([]*Encoding, len(indices))
	T := 0
	for k, i := range indices {
		e, err := c.encode(i)
		if err != nil {
			return nil, err
		}
		encs[k] = e
		T = max(T, e.Len())
	}
	if m := c.opts.PadToMultipleOf; m > 1 && T%m != 0 {
		T += m - T%m
	}
	B := len(indices)
	b := &Batch{B: B, T: T,
		InputIDs:      make([]int32, B*T),
		TokenTypeIDs:  make([]int32, B*T),
		AttentionMask: make([]int32, B*T),
	}
	padID, _ := c.tok.PadID()
	for k, e := range encs {
		row := k * T
		copy(b.InputIDs[row:], e.IDs)
		copy(b.TokenTypeIDs[row:], e.TypeIDs)
		copy(b.AttentionMask[row:], e.AttentionMask)
		for j := e.Len(); j < T; j++ {
			b.InputIDs[row+j] = padID
			b.TokenTypeIDs[row+j] = c.tok.padTypeID
		}
	}
	if c.ds.Regression {
		b.Targets = make([]float32, B)
		for k, i := range indices {
			b.Targets[k] = c.ds.Examples[i].Target
		}
	} else {
		b.Labels = make([]int64, B)
		for k, i := range indices {
			b.Labels[k] = c.ds.Examples[i].Label
		}
	}
	return b, nil
}
