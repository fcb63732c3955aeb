package gpt2

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/internal/smallfile"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// generationConfigName is the file transformers' GenerationConfig.save_pretrained writes beside config.json.
const generationConfigName = "generation_config.json"

// DefaultMaxShardBytes is the shard size above which Save writes a sharded checkpoint (5 GB, transformers 4's
// max_shard_size default).
const DefaultMaxShardBytes = 5_000_000_000

// tensorSpecs lists the tensors a GPT2LMHeadModel of cfg holds, in named_parameters() order, with their
// shapes in the file (Conv1D weights (in, out)), computed from the config so that a checkpoint is checked
// before anything is allocated. TestTensorSpecsMatchParameters checks they are the model's parameter list
// (transformer.CheckpointTensors), so the name table has one source.
func tensorSpecs(cfg Config) []transformer.CheckpointTensor {
	c, inter := cfg.NEmbd, cfg.Inner()
	s := []transformer.CheckpointTensor{{Name: "transformer.wte.weight", Shape: []int{cfg.VocabSize, c}},
		{Name: "transformer.wpe.weight", Shape: []int{cfg.NPositions, c}}}
	add := func(name string, shape ...int) { s = append(s, transformer.CheckpointTensor{Name: name, Shape: shape}) }
	for i := range cfg.NLayer {
		pre := "transformer.h." + strconv.Itoa(i) + "."
		add(pre+"ln_1.weight", c)
		add(pre+"ln_1.bias", c)
		add(pre+"attn.c_attn.weight", c, 3*c)
		add(pre+"attn.c_attn.bias", 3*c)
		add(pre+"attn.c_proj.weight", c, c)
		add(pre+"attn.c_proj.bias", c)
		add(pre+"ln_2.weight", c)
		add(pre+"ln_2.bias", c)
		add(pre+"mlp.c_fc.weight", c, inter)
		add(pre+"mlp.c_fc.bias", inter)
		add(pre+"mlp.c_proj.weight", inter, c)
		add(pre+"mlp.c_proj.bias", c)
	}
	add("transformer.ln_f.weight", c)
	add("transformer.ln_f.bias", c)
	if !cfg.TieWordEmbeddings {
		add("lm_head.weight", cfg.VocabSize, c)
	}
	return s
}

// isConv reports whether a canonical parameter name is a Conv1D weight (stored (in, out) in checkpoints).
func isConv(name string) bool {
	for _, suffix := range []string{"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// checkpointRules are GPT-2's naming rules: GPT2Model checkpoints lack the "transformer." prefix; older
// transformers saved the causal-mask buffers attn.bias ((1, 1, P, P) lower-triangular) and attn.masked_bias
// with every attention layer; a tied lm_head.weight is transformer.wte.weight; Conv1D weights are transposed.
func checkpointRules(cfg Config) transformer.CheckpointRules {
	r := transformer.CheckpointRules{
		Canonical: func(key string, want map[string]bool) (string, bool) {
			if want[key] {
				return key, true
			}
			return "transformer." + key, want["transformer."+key]
		},
		Ignore: func(key string) string {
			if strings.HasSuffix(key, ".attn.bias") || strings.HasSuffix(key, ".attn.masked_bias") {
				return "buffer"
			}
			return ""
		},
		Transposed: isConv,
	}
	if cfg.TieWordEmbeddings {
		r.Tied = map[string]string{"lm_head.weight": "transformer.wte.weight"}
	}
	return r
}

// LoadPretrained builds a GPT2LMHeadModel on b from a Hugging Face checkpoint directory: config.json
// (ReadConfig) and model.safetensors or a sharded index. Keys with and without the "transformer." prefix load
// (GPT2LMHeadModel and GPT2Model checkpoints), the attn.bias / attn.masked_bias buffers of older checkpoints
// are skipped, Conv1D weights are transposed from (in, out), and F16/BF16 tensors widen to the FP32 masters.
// A tied checkpoint needs no lm_head.weight. A missing, unexpected or mis-shaped tensor is an error naming it,
// found from the safetensors headers before the model is allocated. generation_config.json, when present, is
// kept and written back by Save.
func LoadPretrained(dir string, b tensor.Backend, opts transformer.LoadOptions) (m *GPT2LMHeadModel, report *transformer.LoadReport, err error) {
	defer recoverError(&err)
	if opts.NumLabels > 0 || opts.Labels != nil || opts.ProblemType != "" {
		return nil, nil, fmt.Errorf("gpt2: load %s: GPT2LMHeadModel is a causal language model and takes no classification labels (num_labels, labels, problem_type)", dir)
	}
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, nil, err
	}
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		return nil, nil, errctx.Wrapf(err, "gpt2: load %s", dir)
	}
	defer ck.Close()
	rules := checkpointRules(cfg)
	source, report, err := matchPretrained(dir, cfg, ck)
	if err != nil {
		return nil, report, err
	}
	if m, err = newModel(b, cfg); err != nil {
		return nil, report, err
	}
	if err := m.SetAttnImplementation(opts.AttnImplementation); err != nil {
		m.FreeParameters()
		return nil, report, err
	}
	if gen, err := smallfile.Read(filepath.Join(dir, generationConfigName)); err == nil {
		m.generation = gen
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, report, fmt.Errorf("gpt2: load %s: %w", dir, err)
	}
	if err := transformer.LoadParams(b, ck, m.namedParameters(), source, rules); err != nil {
		m.FreeParameters()
		return nil, report, errctx.Wrapf(err, "gpt2: load %s", ck.Path)
	}
	m.WeightsUpdated()
	return m, report, nil
}

// matchPretrained matches the checkpoint ck of dir with the tensors cfg implies (tensorSpecs), from the headers:
// the source of each parameter, the report, and an error naming what does not match. A config with more
// layers than the checkpoint holds is refused first, so the list of expected tensors is never longer than the
// checkpoint's (n_layer 10000000 beside two layers would otherwise list 120 million names).
func matchPretrained(dir string, cfg Config, ck *loaders.Checkpoint) (map[string]string, *transformer.LoadReport, error) {
	configPath := filepath.Join(dir, loaders.ConfigName)
	if err := transformer.CheckLayerCount(configPath, "n_layer", cfg.NLayer, ck, "transformer.h.", "h."); err != nil {
		return nil, nil, fmt.Errorf("gpt2: load %s: %w", dir, err)
	}
	source, lr := transformer.MatchCheckpoint(tensorSpecs(cfg), ck.Infos(), checkpointRules(cfg))
	report := &transformer.LoadReport{LoadReport: lr, Architecture: "GPT2LMHeadModel"}
	if p := transformer.CheckpointProblems(lr); p != "" {
		return nil, report, badinput.Errorf("gpt2: load %s: %s\n(tune's GPT2LMHeadModel has transformer.{wte,wpe,h.N.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj},ln_f} "+
			"and, untied, lm_head; the shapes come from %s)", ck.Path, p, configPath)
	}
	return source, report, nil
}

// CheckPretrained matches the checkpoint ck with the config.json in dir as LoadPretrained does before it builds
// the model (transformer.Family.Check): the report, and LoadPretrained's error for weights the config does not
// describe. Only the headers are read.
func CheckPretrained(dir string, ck *loaders.Checkpoint) (*transformer.LoadReport, error) {
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	_, report, err := matchPretrained(dir, cfg, ck)
	return report, err
}

// Save writes the model as transformers' save_pretrained does: config.json, model.safetensors (every
// parameter in F32 under its Hugging Face name, Conv1D weights (in, out), a tied lm_head.weight left out as
// transformers leaves it out; shards with an index above DefaultMaxShardBytes) and the generation_config.json
// the checkpoint came with, so GPT2LMHeadModel.from_pretrained(dir) loads it with no missing or unexpected
// keys.
func (m *GPT2LMHeadModel) Save(dir string) error { return m.SaveSharded(dir, DefaultMaxShardBytes) }

// SaveSharded is Save with transformers' max_shard_size in bytes: above it the weights go into
// model-0000i-of-0000N.safetensors shards with model.safetensors.index.json.
func (m *GPT2LMHeadModel) SaveSharded(dir string, maxShardBytes int64) (err error) {
	defer recoverError(&err)
	if err := transformer.SaveParams(m.Backend(), dir, m.namedParameters(), checkpointRules(m.Config), maxShardBytes); err != nil {
		return errctx.Wrap("gpt2: save", err)
	}
	if m.generation != nil {
		if err := atomicfile.WriteFile(filepath.Join(dir, generationConfigName), m.generation, 0o644); err != nil {
			return errctx.Wrap("gpt2: save", err)
		}
	}
	return m.SaveConfig(dir)
}

// SaveConfig writes dir/config.json alone (Config.WriteConfig); a LoRA adapter directory holds it too.
func (m *GPT2LMHeadModel) SaveConfig(dir string) error { return m.Config.WriteConfig(dir) }

// Load reads back into the model's parameters what Save wrote in dir (trainer.Loader): every parameter under
// its name and shape; any other tensor is an error. The weight-cast cache is invalidated.
func (m *GPT2LMHeadModel) Load(dir string) (err error) {
	defer recoverError(&err)
	if err := transformer.ReloadParams("gpt2", m.Backend(), dir, m.namedParameters(), checkpointRules(m.Config)); err != nil {
		return err
	}
	m.WeightsUpdated()
	return nil
}
