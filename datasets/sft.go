package datasets

import (
	"fmt"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/sft"
)

// SFT adapts tokenized supervised fine-tuning data (package sft) to the Trainer: each index is one row (one
// example, or several packed ones), collated with right padding.
type SFT struct {
	*sft.Dataset
	// Rows are the dataset's rows, packed when the data were loaded with packing.
	Rows []sft.Row
	// PadID is the id pads get (pad_token, else eos_token); pads are masked.
	PadID int32
}

// LoadSFT reads the JSONL file path with sft.Load (TRL's formats, tk's tokenizer and chat template, opts), checks
// that every token id fits the tokenizer's vocabulary (naming file:line), and lays the examples out in rows,
// packed when opts.Packing is set.
func LoadSFT(path string, tk sft.Tokenizer, opts sft.Options) (*SFT, error) {
	ds, err := sft.Load(path, tk, opts)
	if err != nil {
		return nil, err
	}
	if tk.Tok != nil {
		if v := tk.Tok.VocabSize(); v > 0 {
			for _, e := range ds.Examples {
				for _, id := range e.InputIDs {
					if int(id) >= v {
						return nil, fmt.Errorf("%s:%d: token id %d is beyond the tokenizer's %d", path, e.Line, id, v)
					}
				}
			}
		}
	}
	return &SFT{Dataset: ds, Rows: ds.Rows(opts.Packing), PadID: tk.PadID()}, nil
}

// Len is the number of rows.
func (d *SFT) Len() int { return len(d.Rows) }

// Batch collates the rows at indices.
func (d *SFT) Batch(indices []int) (*loaders.Batch, error) {
	rows := make([]sft.Row, len(indices))
	for i, k := range indices {
		if k < 0 || k >= len(d.Rows) {
			return nil, fmt.Errorf("datasets: row %d of %d", k, len(d.Rows))
		}
		rows[i] = d.Rows[k]
	}
	return sft.Collate(rows, d.PadID)
}
