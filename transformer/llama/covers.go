package llama

import (
	"fmt"
	"path/filepath"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/transformer"
)

// layerPrefixes are the names a checkpoint's decoder layers go by: LlamaForCausalLM's, and a base model's
// (LlamaModel, no "model." prefix).
var layerPrefixes = []string{"model.layers.", "layers."}

// checkCovers refuses, before anything is allocated, a config.json that describes a model far larger than the
// checkpoint beside it: LoadPretrained builds the model from config.json and only then matches its parameters
// with the checkpoint's tensors, so a hostile or mistaken config (num_hidden_layers 10000000 over a two-layer
// checkpoint) would otherwise allocate without bound before the mismatch is found. Every parameter comes from
// the checkpoint, so a config with more layers than the checkpoint holds is named by its num_hidden_layers, and
// one whose parameter count exceeds twice the checkpoint's values (a smaller shortfall is left to the
// tensor-by-tensor report, which names each missing or mis-shaped tensor) by its sizes. Memory is then bounded
// by about twice the checkpoint.
func checkCovers(cfg Config, ck *loaders.Checkpoint, dir string) error {
	configPath := filepath.Join(dir, loaders.ConfigName)
	if err := transformer.CheckLayerCount(configPath, "num_hidden_layers", cfg.NumHiddenLayers, ck, layerPrefixes...); err != nil {
		return fmt.Errorf("llama: load %s: %w", dir, err)
	}
	var values int64
	for _, ti := range ck.Infos() {
		values += ti.NumElements()
	}
	if n := cfg.NumParameters(); n > 2*values {
		return fmt.Errorf("llama: load %s: %s describes a model of %d parameters (vocab_size %d, hidden_size %d, "+
			"intermediate_size %d, num_hidden_layers %d) but the checkpoint %s holds %d values: config.json does not "+
			"describe these weights", dir, configPath, n, cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize,
			cfg.NumHiddenLayers, ck.Path, values)
	}
	return nil
}
