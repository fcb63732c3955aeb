package recipes

import (
	"fmt"
	"path/filepath"

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
