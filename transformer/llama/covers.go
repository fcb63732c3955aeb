package llama

import (
	"fmt"
	"path/filepath"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor/meta"
	"github.com/tune-ml/tune/transformer"
)

// layerPrefixes are the names a checkpoint's decoder layers go by: LlamaForCausalLM's, and a base model's
// (LlamaModel, no "model." prefix).
var layerPrefixes = []string{"model.layers.", "layers."}

// checkCovers refuses, before anything is built, a config.json that describes more layers than the checkpoint
// beside it holds (named by its num_hidden_layers): the parameter list is then no longer than the checkpoint's
// (num_hidden_layers 10000000 over a two-layer checkpoint took 12 GiB in 35 s to list). The sizes of each tensor
// are matched next on the meta backend (matchMeta), before anything is allocated.
func checkCovers(cfg Config, ck *loaders.Checkpoint, dir string) error {
	configPath := filepath.Join(dir, loaders.ConfigName)
	if err := transformer.CheckLayerCount(configPath, "num_hidden_layers", cfg.NumHiddenLayers, ck, layerPrefixes...); err != nil {
		return fmt.Errorf("llama: load %s: %w", dir, err)
	}
	return nil
}

// matchMeta matches the checkpoint ck of dir with the parameters cfg implies, from the headers and a model
// built on the meta backend (no memory: a config of any size costs its parameter list, which checkCovers has
// bounded by the checkpoint's layers): the report, the checkpoint key of each parameter, and LoadPretrained's
// error naming every missing, unexpected or mis-shaped tensor (its name, the checkpoint's shape and the one
// config.json implies; bad input). A config far larger than its weights (vocab_size 100000 over a table of
// 756 rows) is reported by its tensors as one slightly off is, so LoadPretrained allocates only once every
// parameter has a checkpoint tensor of its shape.
func matchMeta(dir string, cfg Config, ck *loaders.Checkpoint) (*transformer.LoadReport, map[string]string, error) {
	if err := checkCovers(cfg, ck, dir); err != nil {
		return nil, nil, err
	}
	m, err := build(meta.New(nil), cfg)
	if err != nil {
		return nil, nil, err
	}
	lr, source := m.match(ck)
	return &transformer.LoadReport{LoadReport: lr, Architecture: cfg.Architecture}, source, problemsError(dir, ck, lr)
}
