package datasets

import (
	"fmt"

	"github.com/tune-ml/tune/loaders"
)

// TextOptions say how LoadText reads and batches a text-classification file.
type TextOptions struct {
	// Format, TextColumn, TextPairColumn, LabelColumn, Unlabelled, Regression, NumLabels and Label2ID are
	// loaders.DatasetOptions: which columns hold the text, the text pair and the label, and how labels map to
	// class ids.
	loaders.DatasetOptions
	// MaxLength truncates each example to this many tokens (special tokens included); 0 keeps whole examples.
	MaxLength int
	// PadToMultipleOf rounds each batch's padded length up to a multiple of it (0 or 1: no rounding).
	PadToMultipleOf int
	// GroupByLength makes each epoch visit examples of similar length together (HF's group_by_length).
	GroupByLength bool
}

// Text adapts a loaders.Dataset and its Collator to the Trainer: Batch collates (tokenize, truncate to
// MaxLength, pad dynamically to the longest example), and with GroupByLength the epoch order groups examples
// of similar length (loaders.EpochOrder).
type Text struct {
	*loaders.Dataset
	Collator      *loaders.Collator // tokenizes, truncates to MaxLength and pads each batch
	GroupByLength bool              // epochs visit similar lengths together
}

// LoadText reads the data file path with opts and pairs it with a Collator over tok. Tokenization is lazy (and
// cached): a file is read and its labels checked here, each example tokenized the first time a batch needs it.
// Errors name the file and line (loaders.LoadDataset); an integer label at or beyond opts.NumLabels is a
// *loaders.LabelRangeError.
func LoadText(path string, tok *loaders.Tokenizer, opts TextOptions) (*Text, error) {
	if tok == nil {
		return nil, fmt.Errorf("datasets: LoadText %s needs a tokenizer", path)
	}
	ds, err := loaders.LoadDataset(path, opts.DatasetOptions)
	if err != nil {
		return nil, err
	}
	c, err := loaders.NewCollator(tok, ds, loaders.CollatorOptions{MaxLength: opts.MaxLength,
		PadToMultipleOf: opts.PadToMultipleOf, Cache: true})
	if err != nil {
		return nil, err
	}
	return &Text{Dataset: ds, Collator: c, GroupByLength: opts.GroupByLength}, nil
}

// Batch collates the examples at indices, in that order.
func (d *Text) Batch(indices []int) (*loaders.Batch, error) {
	return d.Collator.Collate(indices)
}

// EpochOrder returns the order in which epoch (from 0) visits the examples: loaders.EpochOrder, with the
// tokenized lengths when GroupByLength is set. It is a pure function of its arguments, as resuming needs.
func (d *Text) EpochOrder(epoch int, shuffle bool, seed uint64, batchSize int) ([]int, error) {
	opts := loaders.SamplerOptions{Shuffle: shuffle, Seed: seed, GroupByLength: d.GroupByLength, BatchSize: batchSize}
	if d.GroupByLength {
		var err error
		if opts.Lengths, err = d.Collator.Lengths(); err != nil {
			return nil, err
		}
	}
	return loaders.EpochOrder(d.Len(), epoch, opts)
}
