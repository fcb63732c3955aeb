package llama

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/errctx"
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
		Load: func(dir string, b tensor.Backend, opts transformer.LoadOptions) (transformer.Adaptable, *transformer.LoadReport, error) {
			m, r, err := LoadPretrained(dir, b, opts)
			if err != nil {
				return nil, r, err
			}
			return m, r, nil
		},
	})
}

var _ transformer.Adaptable = (*ForCausalLM)(nil)

// ignorable reports whether a checkpoint key is a buffer transformers never loads (older checkpoints store
// rotary_emb.inv_freq per layer).
func ignorable(key string) bool { return strings.HasSuffix(key, "rotary_emb.inv_freq") }

// canonical maps a checkpoint key to the model's name: a base-model checkpoint (LlamaModel) has no "model."
// prefix.
func canonical(key string, want map[string]bool) (string, bool) {
	if want[key] {
		return key, key != ""
	}
	if want["model."+key] {
		return "model." + key, true
	}
	return "", false
}

// LoadPretrained builds the model from a Hugging Face checkpoint directory: config.json (v4 or v5 layout, see
// ParseConfig) and model.safetensors or a sharded model.safetensors.index.json, in F32, F16 or BF16 (widened
// to the FP32 masters). Names come from the model's own parameter list; a checkpoint of the base model (no
// "model." prefix) loads too. A tensor the model lacks in the checkpoint, a checkpoint tensor the model does
// not have (other than rotary inv_freq buffers, and lm_head.weight of a tied model), or a shape that differs
// is an error naming the tensors and the config.json the shapes come from. generation_config.json is kept for
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
	if m, err = build(b, cfg); err != nil {
		return nil, nil, err
	}
	lr, source := m.match(ck)
	report = &transformer.LoadReport{LoadReport: lr, Architecture: cfg.Architecture}
	if len(lr.Missing) > 0 || len(lr.Unexpected) > 0 || len(lr.Mismatched) > 0 {
		m.FreeParameters()
		return nil, report, fmt.Errorf("llama: load %s: %s\nconfig.json (%s) does not describe these weights: check the checkpoint and its config",
			ck.Path, problems(lr), filepath.Join(dir, loaders.ConfigName))
	}
	for _, np := range m.namedParameters() {
		if err := m.loadParam(ck, source[np.Name], np); err != nil {
			m.FreeParameters()
			return nil, report, errctx.Wrapf(err, "llama: load %s", ck.Path)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, GenerationConfigName)); err == nil {
		m.extra.generationConfig = data
	}
	m.WeightsUpdated()
	return m, report, nil
}

// problems describes a report's missing, unexpected and mis-shaped tensors in one line each.
func problems(lr *loaders.LoadReport) string {
	var s []string
	if len(lr.Missing) > 0 {
		s = append(s, fmt.Sprintf("%d tensors missing from the checkpoint: %s", len(lr.Missing), loaders.SummarizeNames(lr.Missing, 8)))
	}
	if len(lr.Unexpected) > 0 {
		s = append(s, fmt.Sprintf("%d tensors the model does not have: %s", len(lr.Unexpected), loaders.SummarizeNames(lr.Unexpected, 8)))
	}
	for _, mm := range lr.Mismatched {
		s = append(s, mm.String())
	}
	return strings.Join(s, "; ")
}

// match pairs the model's parameters with the checkpoint's tensors by name and shape.
func (m *ForCausalLM) match(ck *loaders.Checkpoint) (*loaders.LoadReport, map[string]string) {
	list := m.namedParameters()
	want := make(map[string]bool, len(list))
	shape := make(map[string][]int, len(list))
	for _, np := range list {
		want[np.Name], shape[np.Name] = true, np.Param.Value.Shape
	}
	lr := &loaders.LoadReport{}
	source := map[string]string{}
	for _, ti := range ck.Infos() {
		name, ok := canonical(ti.Name, want)
		switch {
		case ok:
			if !slices.Equal(ti.Shape, shape[name]) {
				lr.Mismatched = append(lr.Mismatched, loaders.ShapeMismatch{Name: name, Key: ti.Name, Checkpoint: ti.Shape, Model: shape[name]})
				continue
			}
			source[name] = ti.Name
			lr.Matched++
			if name != ti.Name {
				lr.Renamed = append(lr.Renamed, loaders.RenamedTensor{Key: ti.Name, Name: name})
			}
		case ignorable(ti.Name):
			lr.Ignored = append(lr.Ignored, loaders.IgnoredTensor{Key: ti.Name, Reason: "buffer"})
		case ti.Name == "lm_head.weight" && m.Config.TieWordEmbeddings:
			lr.Ignored = append(lr.Ignored, loaders.IgnoredTensor{Key: ti.Name, Reason: "tied to model.embed_tokens.weight"})
		default:
			lr.Unexpected = append(lr.Unexpected, ti.Name)
		}
	}
	for _, np := range list {
		if _, ok := source[np.Name]; !ok && !slices.ContainsFunc(lr.Mismatched, func(s loaders.ShapeMismatch) bool { return s.Name == np.Name }) {
			lr.Missing = append(lr.Missing, np.Name)
		}
	}
	if m.Config.TieWordEmbeddings {
		lr.Tied = append(lr.Tied, loaders.TiedTensor{Name: "lm_head.weight", Source: "model.embed_tokens.weight"})
	}
	return lr, source
}

// loadParam copies checkpoint tensor src into np (shapes already matched), widening F16/BF16 to F32.
func (m *ForCausalLM) loadParam(ck *loaders.Checkpoint, src string, np transformer.NamedParameter) error {
	ht, err := ck.Get(src)
	if err != nil {
		return errctx.Wrapf(err, "tensor %s", src)
	}
	vals, err := ht.Float32()
	if err != nil {
		return errctx.Wrapf(err, "tensor %s", src)
	}
	return m.Backend().Upload(np.Param.Value, vals)
}

// Save writes the model as save_pretrained does: config.json (the loaded file's keys and layout kept, dtype
// float32), the weights in F32 under their Hugging Face names (a tied lm_head stored once, as the embedding) in
// model.safetensors, or shards with an index above DefaultMaxShardBytes, and the checkpoint's
// generation_config.json when it had one.
func (m *ForCausalLM) Save(dir string) error { return m.SaveSharded(dir, DefaultMaxShardBytes) }

// SaveSharded is Save with a shard size limit in bytes (transformers' max_shard_size).
func (m *ForCausalLM) SaveSharded(dir string, maxShardBytes int64) (err error) {
	defer recoverError(&err)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errctx.Wrap("llama: save", err)
	}
	list := m.namedParameters()
	hosts := make([]loaders.HostTensor, 0, len(list))
	for _, np := range list {
		v := np.Param.Value
		vals := make([]float32, v.Numel())
		if err := m.Backend().Download(vals, v); err != nil {
			return errctx.Wrapf(err, "llama: save: reading %s", np.Name)
		}
		ht, err := loaders.NewHostTensor(np.Name, tensor.F32, v.Shape, vals)
		if err != nil {
			return errctx.Wrap("llama: save", err)
		}
		hosts = append(hosts, ht)
	}
	if _, err := loaders.WriteCheckpoint(dir, hosts, maxShardBytes); err != nil {
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
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		return errctx.Wrap("llama: load", err)
	}
	defer ck.Close()
	lr, source := m.match(ck)
	if len(lr.Missing) > 0 || len(lr.Unexpected) > 0 || len(lr.Mismatched) > 0 {
		return fmt.Errorf("llama: load %s: %s", ck.Path, problems(lr))
	}
	for _, np := range m.namedParameters() {
		if err := m.loadParam(ck, source[np.Name], np); err != nil {
			return errctx.Wrapf(err, "llama: load %s", ck.Path)
		}
	}
	m.WeightsUpdated()
	return nil
}
