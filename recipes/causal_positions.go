package recipes

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/gpt2"
	"github.com/tune-ml/tune/transformer/llama"
)

// checkCausalMaxLength refuses a data.max_length longer than the causal LM at model.path can position.
// GPT-2 looks each position up in a learned table of n_positions rows (transformers' GPT2Model: wpe is an
// nn.Embedding(n_positions, n_embd)), so a longer row indexes out of it. A Llama-family model computes RoPE for
// any position, but was trained on positions below max_position_embeddings only; a rope_scaling that extends
// the context (llama3) is already counted in max_position_embeddings, which such configs raise to the extended
// length (Llama 3.1: 131072 over an original 8192). A config.json the family cannot read is left to Build,
// which reports it.
func (r *Recipe) checkCausalMaxLength(bad func(key, format string, a ...any)) {
	n, key, why := causalPositions(r.Model.Path)
	if n <= 0 || r.Data.MaxLength <= n {
		return
	}
	bad("data.max_length", "%d exceeds the model's %s %d (%s, model.path): %s; set data.max_length=%d or less",
		r.Data.MaxLength, key, n, filepath.Join(r.Model.Path, loaders.ConfigName), why, n)
}

// causalPositions returns the longest sequence the causal LM in dir takes, the config.json key that sets it and
// why a longer one is refused; 0 when the config cannot be read.
func causalPositions(dir string) (n int, key, why string) {
	f, err := transformer.Lookup(dir)
	if err != nil {
		return 0, "", ""
	}
	switch f.Name {
	case "gpt2":
		c, err := gpt2.ReadConfig(dir)
		if err != nil {
			return 0, "", ""
		}
		return c.NPositions, "n_positions", "GPT-2's learned position embedding has that many rows, so a longer row has no position to look up"
	case "llama":
		c, err := llama.ReadConfig(dir)
		if err != nil {
			return 0, "", ""
		}
		why := "the model was trained on positions below it only (its rope_scaling does not extend the context)"
		if c.Rope.Type == llama.RopeLlama3 {
			why = fmt.Sprintf("that is the context its llama3 rope_scaling already extends to (factor %g over %d)",
				c.Rope.Factor, c.Rope.OriginalMaxPositionEmbeddings)
		}
		return c.MaxPositionEmbeddings, "max_position_embeddings", why
	}
	return 0, "", ""
}

// validateCausalData refuses what a causal LM's (SFT) data do not use: data.text_column and data.label_column
// set in the recipe or an override (SFT reads {"text"} rows through data.dataset_text_field, as TRL's
// SFTConfig does, and its labels are the next tokens), and a TSV or CSV data file (SFT data are JSONL). Before,
// both were silently ignored and a .tsv file was read as JSONL.
func (r *Recipe) validateCausalData(d *decoder, bad func(key, format string, a ...any)) {
	set := func(key string) bool { _, ok := d.pos[key]; return ok }
	if set("data.text_column") {
		bad("data.text_column", "does not apply to causal-LM (SFT) data, whose rows are JSONL objects: use data.dataset_text_field "+
			"to name the key of the text in {\"text\": ...} rows (messages and prompt/completion rows need neither)")
	}
	if set("data.label_column") {
		bad("data.label_column", "does not apply to causal-LM (SFT) data: the labels are the text's next tokens; remove the key")
	}
	// The sequence-classification keys the SFT path never reads (they were accepted and ignored).
	for _, k := range []struct {
		key, why string
		on       bool
	}{
		{"data.text_pair_column", "SFT rows have no sentence pairs", set("data.text_pair_column")},
		{"model.num_labels", "a causal LM has no classes: it predicts the next token", set("model.num_labels")},
		{"data.pad_to_multiple_of", "SFT batches are padded to their longest row (or packed into max_length rows)", r.Data.PadToMultipleOf > 0 && set("data.pad_to_multiple_of")},
		{"data.group_by_length", "SFT rows are packed (data.packing) or taken in order", r.Data.GroupByLength},
		{"data.test", "tune finetune does not read it and tune eval evaluates sequence classifiers; the eval set is data.eval", r.Data.Test != ""},
	} {
		if k.on {
			bad(k.key, "does not apply to causal-LM (SFT) data: %s; remove the key", k.why)
		}
	}
	if f := r.Data.Format; f == FormatTSV || f == FormatCSV {
		bad("data.format", "%s does not apply to causal-LM (SFT) data, which are JSONL: one JSON object a line ({\"messages\": [...]}, "+
			"{\"prompt\": ..., \"completion\": ...} or {\"text\": ...}); set data.format=jsonl or remove the key", f)
		return
	}
	for _, f := range r.dataFiles() {
		if format, err := r.Data.FormatOf(f.path); f.path != "" && err == nil && (format == FormatTSV || format == FormatCSV) {
			bad(f.key, "%s is a %s file by its extension, but causal-LM (SFT) data are JSONL: one JSON object a line "+
				"({\"messages\": [...]}, {\"prompt\": ..., \"completion\": ...} or {\"text\": ...}); convert it to a .jsonl file "+
				"(or, if it already holds JSONL, rename it or set data.format=jsonl)", f.path, strings.ToUpper(format))
		}
	}
}

// validateClassifierData refuses the SFT keys a sequence classifier's data do not use (they were accepted and
// ignored: tune validate tiny data.packing=true passed).
func (r *Recipe) validateClassifierData(d *decoder, bad func(key, format string, a ...any)) {
	set := func(key string) bool { _, ok := d.pos[key]; return ok }
	for _, k := range []struct {
		key string
		on  bool
	}{
		{"data.packing", r.Data.Packing},
		{"data.assistant_only_loss", set("data.assistant_only_loss")},
		{"data.completion_only_loss", set("data.completion_only_loss")},
		{"data.dataset_text_field", set("data.dataset_text_field")},
	} {
		if k.on {
			bad(k.key, "does not apply to sequence-classification data (a BERT model): it is a causal-LM (SFT) key; "+
				"the text and label are data.text_column and data.label_column; remove the key")
		}
	}
}

// checkCausalConfig reads the config.json of the causal LM in dir as its family builds from it (the family's
// ProjectionPaths, which reads the config alone, after the weights beside it, if any, are matched with it): an
// error names the file and the first key the model cannot be built from, or the tensors the config does not
// describe.
func checkCausalConfig(dir string) error {
	if _, err := transformer.Lookup(dir); err != nil {
		return nil
	}
	_, err := transformer.ProjectionPaths(dir) // weights beside the config are matched with it first
	return err
}
