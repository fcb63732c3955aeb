package lora

import (
	"errors"
	"fmt"
	"github.com/tune-ml/tune/transformer/bert"
	"slices"
	"strings"

	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/transformer"
)

// Base is what Apply adapts: transformer.Adaptable, a model that trains as transformer.Model describes, whose
// projections can be listed and replaced by module path, and whose parameters can be frozen by name.
// *bert.BertForSequenceClassification and the causal LMs implement it.
type Base = transformer.Adaptable

var _ Base = (*bert.BertForSequenceClassification)(nil)

// Model is a Base with LoRA adapters in place of its targeted projections: PEFT's PeftModel. It trains like its
// base (it implements trainer.Model and trainer.Loader, delegating Forward, Backward and the parameter buffers to
// the base) but saves and loads the adapter only: adapter_config.json and adapter_model.safetensors, in PEFT's
// format. Merge, Unmerge and MergeAndUnload fold the adapters into the base weights.
type Model struct {
	// Base is the adapted model; its targeted projections are *Linear now.
	Base
	// BaseModelNameOrPath is written to adapter_config.json as base_model_name_or_path ("" writes null). PEFT
	// writes whatever name or path the base was loaded from; tune's recipes set the model the user named
	// (recipes.Recipe.BaseModelNameOrPath: a Hub id, an embedded recipe's model.path as written, or else the
	// absolute path of model.path, so that the adapter names its base wherever it is used from).
	BaseModelNameOrPath string
	// Warnings are the adjustments Apply made (Config.Normalize) and what loading noticed, for the caller to
	// print.
	Warnings []string

	config   Config
	targets  []string // adapted module paths, in model order
	layers   map[string]*Linear
	saved    []string // modules_to_save module paths present in the model, in model order
	merged   bool
	unloaded bool
}

// resolve is the first part of Apply: cfg with the model's default target_modules, normalized (its warnings
// returned) and validated, and the module paths it targets in m with every projection by path.
func resolve(m Base, cfg Config) (Config, []string, map[string]transformer.Projection, []string, error) {
	if m == nil {
		return cfg, nil, nil, nil, errors.New("lora: Apply needs a model")
	}
	cfg.TargetModules.Names = slices.Clone(cfg.TargetModules.Names)
	if typed, ok := m.(interface{ ModelType() string }); ok && !cfg.TargetModules.IsSet() {
		if names, ok := DefaultTargetModulesByType[typed.ModelType()]; ok {
			cfg.TargetModules.Names = slices.Clone(names)
		}
	}
	cfg.ModulesToSave = slices.Clone(cfg.ModulesToSave)
	if d, ok := m.(defaultTargeter); ok && !cfg.TargetModules.IsSet() {
		cfg.TargetModules = TargetModules{Names: d.DefaultLoRATargets()}
	}
	_, conv1D := m.(conv1DModel)
	warnings := cfg.NormalizeFor(conv1D)
	if err := cfg.Validate(); err != nil {
		return cfg, nil, nil, nil, err
	}
	projs := m.Projections()
	paths := make([]string, len(projs))
	byPath := make(map[string]transformer.Projection, len(projs))
	for i, p := range projs {
		paths[i] = p.Path
		byPath[p.Path] = p.Projection
	}
	targets, err := cfg.Select(paths)
	if err != nil {
		return cfg, nil, nil, nil, err
	}
	return cfg, targets, byPath, warnings, nil
}

// defaultTargeter is a model that names PEFT's default target_modules for its architecture
// (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING; GPT-2: c_attn); Apply uses it when target_modules is
// unset, else DefaultTargetModules (BERT's) applies.
type defaultTargeter interface{ DefaultLoRATargets() []string }

// conv1DModel is a model whose projections are transformers' Conv1D (weight stored (in, out): GPT-2), for
// which PEFT sets fan_in_fan_out; the model holds the weights (out, in) like any transformer.Linear, so the
// flag only changes adapter_config.json.
type conv1DModel interface{ FanInFanOut(path string) bool }

// Apply adapts m as PEFT's get_peft_model does with a LoraConfig:
//   - cfg is normalized (Config.Normalize: fan_in_fan_out reset with PEFT's warning; SEQ_CLS adds the
//     classification head to modules_to_save) and validated;
//   - every projection whose path cfg targets (Config.Select, PEFT's target_modules matching, check_target_module_exists in peft/tuners/tuners_utils.py) is replaced by a *Linear whose A and B
//     are initialised from seed (NewLinear; each module draws from its own stream keyed by its path);
//   - every parameter is frozen except the adapters, the modules in modules_to_save (trained whole, e.g. the
//     classifier), and the biases cfg.Bias names: "all" trains every parameter whose name contains "bias"
//     (LayerNorm biases too, as PEFT does), "lora_only" the base biases of the adapted projections;
//   - the parameters are re-packed once, so the trainable buffer holds exactly the trained parameters.
//
// It errors when the config is invalid, when it targets nothing (wrapping ErrNoTargets), when a module already
// carries an adapter, or when a modules_to_save module contains an adapted one; m is then left as it was (its
// parameters may have been re-packed).
func Apply(m Base, cfg Config, seed uint64) (*Model, error) {
	cfg, targets, byPath, warnings, err := resolve(m, cfg)
	if err != nil {
		return nil, err
	}
	lm := &Model{Base: m, Warnings: warnings, config: cfg, targets: targets, layers: map[string]*Linear{}}
	saved, unmatched := lm.findSaved()
	for _, name := range unmatched {
		lm.Warnings = append(lm.Warnings, fmt.Sprintf("modules_to_save entry %q matches no module of the model", name))
	}
	lm.saved = saved
	for _, s := range saved {
		for _, t := range targets {
			if strings.HasPrefix(t, s+".") {
				return nil, fmt.Errorf("lora: modules_to_save %q contains the adapted module %q; save a smaller module or drop it from target_modules", s, t)
			}
		}
	}
	bk := m.Backend()
	if err := checkHostMemory(bk, cfg.R, targets, byPath); err != nil {
		return nil, err
	}
	for _, t := range targets {
		if _, ok := byPath[t].(*Linear); ok {
			return nil, fmt.Errorf("lora: %s already has a LoRA adapter; tune supports one adapter per model", t)
		}
		lm.layers[t] = nil
	}
	// Freeze first, naming each target's base parameters as they will be named once wrapped, so that the
	// re-packing with the adapters in place allocates only the (small) trainable buffer.
	wasTrainable := map[string]bool{}
	for _, np := range m.NamedParameters() {
		wasTrainable[np.Name] = np.Trainable
	}
	restore := func() { m.SetTrainable(func(name string) bool { return wasTrainable[name] }) } //nolint:errcheck
	if err := m.SetTrainable(func(name string) bool { return lm.trains(lm.wrappedName(name)) }); err != nil {
		return nil, errctx.Wrap("lora", err)
	}
	repl := make(map[string]transformer.Projection, len(targets))
	free := func() {
		for _, p := range repl {
			bk.Free(p.(*Linear).A.Value)
			bk.Free(p.(*Linear).B.Value)
		}
	}
	trainBias := cfg.Bias == BiasAll || cfg.Bias == BiasLoRAOnly
	for _, path := range targets {
		l, err := NewLinear(bk, byPath[path].Base(), cfg, trainBias, moduleSeed(seed, path))
		if err != nil {
			free()
			restore()
			return nil, errctx.Wrapf(err, "lora: %s", path)
		}
		repl[path] = l
		lm.layers[path] = l
	}
	if err := m.ReplaceProjections(repl); err != nil {
		free()
		restore()
		return nil, errctx.Wrap("lora", err)
	}
	return lm, nil
}

// findSaved returns the module paths that modules_to_save selects (the outermost module on each parameter's
// path that Config.Saves accepts), in model order, and the modules_to_save entries that select nothing (the
// automatically added head names are not reported).
func (m *Model) findSaved() (saved, unmatched []string) {
	used := map[string]bool{}
	for _, np := range m.Base.NamedParameters() {
		if p := m.savedModule(np.Name); p != "" && !slices.Contains(saved, p) {
			saved = append(saved, p)
		}
	}
	for _, s := range saved {
		for _, e := range m.config.ModulesToSave {
			if matchesName(s, e) {
				used[e] = true
			}
		}
	}
	for _, e := range m.config.ModulesToSave {
		if !used[e] && !slices.Contains(SeqClsHeadNames, e) {
			unmatched = append(unmatched, e)
		}
	}
	return saved, unmatched
}

// savedModule returns the outermost module path on name's path (a strict prefix ending at a dot) that is in
// modules_to_save, or "".
func (m *Model) savedModule(name string) string {
	for i := 0; i < len(name); i++ {
		if name[i] == '.' && m.config.Saves(name[:i]) {
			return name[:i]
		}
	}
	return ""
}

// isAdapterParam reports whether name is a lora_A or lora_B weight (in-memory naming, adapter name included).
func isAdapterParam(name string) bool {
	return strings.Contains(name, ".lora_A."+adapterName+".") || strings.Contains(name, ".lora_B."+adapterName+".")
}

// trains reports whether the parameter with this full name is trained and saved with the adapter: the adapters,
// the modules_to_save, and the biases the config's bias names.
func (m *Model) trains(name string) bool {
	switch {
	case isAdapterParam(name), m.savedModule(name) != "":
		return true
	case m.config.Bias == BiasAll:
		return strings.Contains(name, "bias")
	case m.config.Bias == BiasLoRAOnly:
		if target, ok := strings.CutSuffix(name, ".base_layer.bias"); ok {
			_, adapted := m.layers[target]
			return adapted
		}
	}
	return false
}

// wrappedName returns the name a parameter of the unadapted model takes once its module is wrapped: a target's
// "weight" and "bias" become "base_layer.weight" and "base_layer.bias".
func (m *Model) wrappedName(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return name
	}
	if _, ok := m.layers[name[:i]]; ok {
		return name[:i] + ".base_layer" + name[i:]
	}
	return name
}

// Config returns the normalized config the adapters were built with.
func (m *Model) Config() Config {
	c := m.config
	c.TargetModules.Names = slices.Clone(c.TargetModules.Names)
	c.ModulesToSave = slices.Clone(c.ModulesToSave)
	return c
}

// Targets returns the adapted module paths in model order ("bert.encoder.layer.0.attention.self.query", ...).
func (m *Model) Targets() []string { return slices.Clone(m.targets) }

// Adapter returns the adapted layer at a module path, or nil.
func (m *Model) Adapter(path string) *Linear { return m.layers[path] }

// SavedModules returns the module paths trained whole and saved with the adapter (modules_to_save), in model
// order ("classifier").
func (m *Model) SavedModules() []string { return slices.Clone(m.saved) }

// Forward runs the base model with its adapters (trainer.Model's Forward). A training pass on a merged model is an
// error wrapping ErrMerged: the merged adapters would get gradients they no longer contribute.
func (m *Model) Forward(b *loaders.Batch, opts transformer.ForwardOptions) (transformer.Output, error) {
	if err := m.usable(); err != nil {
		return transformer.Output{}, err
	}
	if opts.Train && m.merged {
		return transformer.Output{}, fmt.Errorf("lora: training forward: %w; call Unmerge before training", ErrMerged)
	}
	return m.Base.Forward(b, opts)
}

// usable errors after MergeAndUnload handed the base model back.
func (m *Model) usable() error {
	if m.unloaded {
		return errors.New("lora: the model was unloaded by MergeAndUnload; use the model it returned")
	}
	return nil
}

// Merged reports whether the adapters are merged into the base weights.
func (m *Model) Merged() bool { return m.merged }

// Merge adds scaling·B·A to the base weight of every adapted projection (PEFT's merge_adapter) and
// invalidates the weight-cast cache. The merged model gives the same logits up to FP32 rounding (PEFT's merge and unmerge, peft/tuners/lora/layer.py) at
// the cost of the base alone; it can run inference but not train until Unmerge. A base stored in half
// (StoreFrozenIn, as the trainer does under autocast) is merged in its dtype: W + scaling·B·A is formed in FP32
// and rounded once. Errors wrap ErrMerged when already merged.
func (m *Model) Merge() error {
	if err := m.usable(); err != nil {
		return err
	}
	if m.merged {
		return fmt.Errorf("lora: merge: %w", ErrMerged)
	}
	bk := m.Backend()
	for i, path := range m.targets {
		if err := m.layers[path].Merge(bk); err != nil {
			for _, done := range m.targets[:i] {
				m.layers[done].Unmerge(bk) //nolint:errcheck // best effort: restoring after a failed merge
			}
			m.WeightsUpdated()
			return errctx.Wrapf(err, "lora: merging %s", path)
		}
	}
	m.merged = true
	m.WeightsUpdated()
	return nil
}

// Unmerge subtracts the adapters from the base weights again (PEFT's unmerge_adapter); the base weights come
// back within one FP32 rounding of their values before Merge (PEFT's merge and unmerge, peft/tuners/lora/layer.py). A no-op when not merged.
func (m *Model) Unmerge() error {
	if err := m.usable(); err != nil {
		return err
	}
	if !m.merged {
		return nil
	}
	bk := m.Backend()
	for _, path := range m.targets {
		if err := m.layers[path].Unmerge(bk); err != nil {
			m.WeightsUpdated()
			return errctx.Wrapf(err, "lora: unmerging %s", path)
		}
	}
	m.merged = false
	m.WeightsUpdated()
	return nil
}

// MergeAndUnload merges the adapters (if not already merged) and returns the base model with each adapted
// projection's plain Linear back in place (PEFT's merge_and_unload): its parameters have transformers' names
// again, so its Save writes a checkpoint that transformers loads with no missing or unexpected key. The
// modules_to_save keep their trained values. Trainability is left as Apply set it (base weights frozen); call
// SetTrainable on the result to train it fully. m must not be used afterwards.
func (m *Model) MergeAndUnload() (Base, error) {
	if err := m.usable(); err != nil {
		return nil, err
	}
	if !m.merged {
		if err := m.Merge(); err != nil {
			return nil, err
		}
	}
	repl := make(map[string]transformer.Projection, len(m.targets))
	for _, path := range m.targets {
		repl[path] = m.layers[path].Base()
	}
	if err := m.ReplaceProjections(repl); err != nil {
		return nil, errctx.Wrap("lora: unloading the adapters", err)
	}
	m.unloaded = true
	return m.Base, nil
}

// SetGradientCheckpointing turns gradient checkpointing of the base model on or off
// (transformer.GradientCheckpointer, PeftModel forwarding gradient_checkpointing_enable to its base); a base
// that cannot recompute is left as it is, and GradientCheckpointing then reports false. The adapters'
// activations are recomputed with their layer's (same lora_dropout masks).
func (m *Model) SetGradientCheckpointing(on bool) {
	if gc, ok := m.Base.(transformer.GradientCheckpointer); ok {
		gc.SetGradientCheckpointing(on)
	}
}

// GradientCheckpointing reports whether the base model recomputes its layers in backward.
func (m *Model) GradientCheckpointing() bool {
	gc, ok := m.Base.(transformer.GradientCheckpointer)
	return ok && gc.GradientCheckpointing()
}

var _ transformer.IncrementalDecoder = (*Model)(nil)

// NewKVCache allocates the base model's key/value cache (transformer.IncrementalDecoder; a causal LM). The
// adapters, merged or not, compute in the base's decode passes as in its Forward.
func (m *Model) NewKVCache(maxLen int) (*transformer.KVCache, error) {
	d, err := m.decoder()
	if err != nil {
		return nil, err
	}
	return d.NewKVCache(maxLen)
}

// Decode decodes ids with the base model's key/value cache (transformer.IncrementalDecoder), adapters applied.
func (m *Model) Decode(cache *transformer.KVCache, ids []int32, all bool) ([]float32, error) {
	d, err := m.decoder()
	if err != nil {
		return nil, err
	}
	return d.Decode(cache, ids, all)
}

// decoder returns the base as an incremental decoder, or why it is not one.
func (m *Model) decoder() (transformer.IncrementalDecoder, error) {
	if err := m.usable(); err != nil {
		return nil, err
	}
	d, ok := m.Base.(transformer.IncrementalDecoder)
	if !ok {
		return nil, fmt.Errorf("lora: the base model %T has no key/value cache (only causal language models decode)", m.Base)
	}
	return d, nil
}

// suspectScaling is the scaling above which NonFiniteHint names it as the likely cause of a non-finite loss or
// gradient. PEFT's default is 1 (lora_alpha 8, r 8), the usual lora_alpha = r or 2·r gives 1 or 2, and rsLoRA's
// lora_alpha/√r stays below 128 for ranks up to 4096 with lora_alpha = 2·r; beyond 1000 the factor, which
// multiplies every adapter's output and its gradients (dB = scaling·dOutᵀ·h), is outside any published
// setting.
const suspectScaling = 1000

// NonFiniteHint returns what to change when a run with these adapters meets a non-finite loss or gradient and
// their scaling is far above the usual range (suspectScaling), or "" (trainer.NonFiniteHinter): the trainer
// then leads with it rather than pointing at the data.
func (m *Model) NonFiniteHint() string {
	c := m.config
	s := c.Scaling()
	if s <= suspectScaling {
		return ""
	}
	rule := "lora_alpha/r"
	if c.UseRSLoRA {
		rule = "lora_alpha/√r"
	}
	return fmt.Sprintf("the LoRA scaling %s = %.3g (lora_alpha %g, r %d) multiplies every adapter's output and gradients "+
		"and is the likely cause: lower lora_alpha (usually r or 2·r, scaling 1 or 2)", rule, s, c.LoraAlpha, c.R)
}
