package llama

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/internal/smallfile"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// GenerationConfigName is transformers' generation settings file, kept beside a saved model.
const GenerationConfigName = "generation_config.json"

// DefaultMaxShardBytes is the shard size above which Save writes a sharded checkpoint (transformers 5's
// save_pretrained default max_shard_size is "50GB"; tune keeps shards at 5 GB, transformers 4's default).
const DefaultMaxShardBytes = 5_000_000_000

// savedExtras are files of the loaded checkpoint directory written back verbatim by Save.
type savedExtras struct {
	generationConfig []byte // generation_config.json; nil when the checkpoint had none
}

func init() {
	transformer.Register(transformer.Family{
		Name: "llama", ModelTypes: ModelTypes(),
		Architectures: []string{"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MistralForCausalLM"},
		Load:          transformer.Loader(LoadPretrained),
		ProjectionPaths: func(dir string) ([]string, error) {
			cfg, err := ReadConfig(dir)
			if err != nil {
				return nil, err
			}
			return ProjectionPaths(cfg), nil
		},
		Check: CheckPretrained,
		Skeleton: func(dir string, b tensor.Backend) (transformer.Adaptable, error) {
			cfg, err := ReadConfig(dir)
			if err != nil {
				return nil, err
			}
			m, err := build(b, cfg)
			if err != nil {
				return nil, err // not a typed nil inside the interface
			}
			return m, nil
		},
	})
}

var _ transformer.Adaptable = (*ForCausalLM)(nil)

// rules are the Llama family's checkpoint conventions: a base-model checkpoint (LlamaModel) has no "model."
// prefix; older checkpoints store rotary_emb.inv_freq buffers per layer, which transformers never loads; a
// tied model's lm_head.weight, when a checkpoint stores it, is the embedding.
func (m *ForCausalLM) rules() transformer.CheckpointRules {
	r := transformer.CheckpointRules{
		Canonical: func(key string, want map[string]bool) (string, bool) {
			if want[key] {
				return key, true
			}
			return "model." + key, want["model."+key]
		},
		Ignore: func(key string) string {
			if strings.HasSuffix(key, "rotary_emb.inv_freq") {
				return "buffer"
			}
			return ""
		},
	}
	if m.Config.TieWordEmbeddings {
		r.Tied = map[string]string{"lm_head.weight": "model.embed_tokens.weight"}
	}
	return r
}

// match pairs the model's parameters with the checkpoint's tensors by name and shape.
func (m *ForCausalLM) match(ck *loaders.Checkpoint) (*loaders.LoadReport, map[string]string) {
	rules := m.rules()
	source, lr := transformer.MatchCheckpoint(transformer.CheckpointTensors(m.namedParameters(), rules), ck.Infos(), rules)
	return lr, source
}

// LoadPretrained builds the model from a Hugging Face checkpoint directory: config.json (v4 or v5 layout, see
// ParseConfig) and model.safetensors or a sharded model.safetensors.index.json, in F32, F16 or BF16 (widened
// to the FP32 masters). Names come from the model's own parameter list; a checkpoint of the base model (no
// "model." prefix) loads too. A tensor the model lacks in the checkpoint, a checkpoint tensor the model does
// not have (other than rotary inv_freq buffers, and lm_head.weight of a tied model), or a shape that differs
// is an error naming the tensors (each with the checkpoint's shape and the config's) and the config.json the
// shapes come from, found from the headers before anything is allocated (matchMeta). generation_config.json is kept for
// Save. opts are BERT's classification options; a causal LM has none (LoadOptions.Seed is unused: every
// tensor comes from the checkpoint).
func LoadPretrained(dir string, b tensor.Backend, opts transformer.LoadOptions) (m *ForCausalLM, report *transformer.LoadReport, err error) {
	defer recoverError(&err)
	if opts.NumLabels > 0 || opts.Labels != nil || opts.ProblemType != "" {
		return nil, nil, fmt.Errorf("llama: load %s: a causal language model has no classification labels (num_labels, labels, problem_type)", dir)
	}
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, nil, err
	}
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		return nil, nil, errctx.Wrapf(err, "llama: load %s", dir)
	}
	defer ck.Close()
	report, source, err := matchMeta(dir, cfg, ck)
	if err != nil {
		return nil, report, err
	}
	if m, err = build(b, cfg); err != nil {
		return nil, report, err
	}
	if err := transformer.LoadParams(m.Backend(), ck, m.namedParameters(), source, m.rules()); err != nil {
		m.FreeParameters()
		return nil, report, errctx.Wrapf(err, "llama: load %s", ck.Path)
	}
	if data, err := smallfile.Read(filepath.Join(dir, GenerationConfigName)); err == nil {
		m.extra.generationConfig = data
	}
	m.WeightsUpdated()
	return m, report, nil
}

// problemsError returns LoadPretrained's error for a report with missing, unexpected, mis-shaped or wrong-dtype tensors, or
// nil.
func problemsError(dir string, ck *loaders.Checkpoint, lr *loaders.LoadReport) error {
	if len(lr.Missing) == 0 && len(lr.Unexpected) == 0 && len(lr.Mismatched) == 0 && len(lr.WrongDType) == 0 {
		return nil
	}
	if len(lr.Missing) == 0 && len(lr.Unexpected) == 0 && len(lr.Mismatched) == 0 { // the names and shapes fit the config
		return badinput.Errorf("llama: load %s: %s", ck.Path, transformer.CheckpointProblems(lr))
	}
	return badinput.Errorf("llama: load %s: %s\nconfig.json (%s) does not describe these weights: check the checkpoint and its config",
		ck.Path, transformer.CheckpointProblems(lr), filepath.Join(dir, loaders.ConfigName))
}

// CheckPretrained matches the checkpoint ck with the config.json in dir as LoadPretrained does, without loading it
// (transformer.Family.Check): the report, and LoadPretrained's error for weights the config does not describe.
// The parameter list comes from the model built on the meta backend (matchMeta), after checkCovers has bounded
// it by the checkpoint's layers, so nothing is allocated by the config's sizes.
func CheckPretrained(dir string, ck *loaders.Checkpoint) (report *transformer.LoadReport, err error) {
	defer recoverError(&err)
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	report, _, err = matchMeta(dir, cfg, ck)
	return report, err
}

// Save writes the model as save_pretrained does: config.json (the loaded file's keys and layout kept, dtype
// float32), the weights in F32 under their Hugging Face names (a tied lm_head stored once, as the embedding) in
// model.safetensors, or shards with an index above DefaultMaxShardBytes, and the checkpoint's
// generation_config.json when it had one.
func (m *ForCausalLM) Save(dir string) error { return m.SaveSharded(dir, DefaultMaxShardBytes) }

// SaveSharded is Save with a shard size limit in bytes (transformers' max_shard_size).
func (m *ForCausalLM) SaveSharded(dir string, maxShardBytes int64) (err error) {
	defer recoverError(&err)
	if err := transformer.SaveParams(m.Backend(), dir, m.namedParameters(), m.rules(), maxShardBytes); err != nil {
		return errctx.Wrap("llama: save", err)
	}
	return m.SaveConfig(dir)
}

// SaveConfig writes config.json (and generation_config.json when the loaded checkpoint had one) into dir.
func (m *ForCausalLM) SaveConfig(dir string) error {
	data, err := m.Config.configJSON()
	if err != nil {
		return errctx.Wrap("llama: save", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, loaders.ConfigName), append(data, '\n'), 0o644); err != nil {
		return errctx.Wrap("llama: save", err)
	}
	if g := m.extra.generationConfig; g != nil {
		if err := atomicfile.WriteFile(filepath.Join(dir, GenerationConfigName), g, 0o644); err != nil {
			return errctx.Wrap("llama: save", err)
		}
	}
	return nil
}

// Load reads back into the model's parameters what Save wrote in dir (trainer.Loader): every parameter under
// its name and shape, and no other tensor.
func (m *ForCausalLM) Load(dir string) (err error) {
	defer recoverError(&err)
	if err := transformer.ReloadParams("llama", m.Backend(), dir, m.namedParameters(), m.rules()); err != nil {
		return err
	}
	m.WeightsUpdated()
	return nil
}
