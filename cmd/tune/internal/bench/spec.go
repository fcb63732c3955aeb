package bench

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/transformer/bert"
	"github.com/tune-ml/tune/transformer/llama"
)

// preset is a named model shape: L layers, hidden size C, H heads, intermediate size I.
type preset struct {
	name       string
	l, c, h, i int
	about      string
}

// presets are the model shapes `tune bench --model` knows by name; every one has BERT's vocabulary (30,522),
// 512 positions, 2 labels and BertConfig's default dropout 0.1.
var presets = []preset{
	{"tiny", 2, 64, 4, 128, "tiny-bert-random's shape (../shared/data/tiny-bert-random)"},
	{"mini", 4, 256, 4, 1024, "google/bert_uncased_L-4_H-256_A-4's shape"},
	{"small", 4, 512, 8, 2048, "google/bert_uncased_L-4_H-512_A-8's shape"},
	{"bert-base", 12, 768, 12, 3072, "bert-base-uncased's shape (BertConfig's defaults)"},
	{"bert-large", 24, 1024, 16, 4096, "bert-large-uncased's shape"},
}

// ModelNames lists the BERT preset names ModelConfig accepts, smallest first.
func ModelNames() []string {
	names := make([]string, len(presets))
	for i, p := range presets {
		names[i] = p.name
	}
	return names
}

// isJSONPath reports whether a --model value names a config.json file rather than a preset.
func isJSONPath(name string) bool { return strings.HasSuffix(name, ".json") }

// SetModel points s at the model name names: a BERT preset (ModelNames) or BERT config.json, which sets
// s.Config and clears s.Decoder, or a causal-LM preset (DecoderNames) or a Llama-family config.json
// (model_type llama, qwen2, qwen3, mistral), which sets s.Decoder. s.Model becomes name.
func (s *Spec) SetModel(name string) error {
	dec, ok, err := decoderConfig(name)
	if err != nil {
		return err
	}
	s.Model, s.Decoder = name, nil
	if ok {
		s.Decoder = dec
		return nil
	}
	cfg, err := ModelConfig(name)
	if err != nil {
		return err
	}
	s.Config = cfg
	return nil
}

// ModelConfig returns the BertConfig of a preset name (ModelNames) or of a config.json file (a path ending in
// .json, read with loaders.ReadBertConfig); the weights are always freshly initialised, so no checkpoint is
// needed. A preset has BertConfig's defaults (dropout 0.1, 2 labels) with its own L, C, H and I.
func ModelConfig(name string) (bert.BertConfig, error) {
	if isJSONPath(name) {
		h, err := loaders.ReadBertConfig(name)
		if err != nil {
			return bert.BertConfig{}, fmt.Errorf("bench: --model %s: %w", name, err)
		}
		cfg, err := bert.BertConfigFromHF(h)
		if err != nil {
			return bert.BertConfig{}, fmt.Errorf("bench: --model %s: %w", name, err)
		}
		return cfg, nil
	}
	for _, p := range presets {
		if p.name == name {
			cfg := bert.DefaultBertConfig()
			cfg.NumHiddenLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.IntermediateSize = p.l, p.c, p.h, p.i
			return cfg, nil
		}
	}
	return bert.BertConfig{}, fmt.Errorf("bench: unknown model %q: want one of %s (BERT), %s (causal LMs), or a "+
		"config.json path", name, strings.Join(ModelNames(), ", "), strings.Join(DecoderNames(), ", "))
}

// Spec is one benchmark configuration: a freshly initialised model trained on one synthetic batch shape in one
// precision, fully or with LoRA, for Warmup untimed and Steps timed optimizer steps.
//
// Each step is what trainer.Trainer does for one optimizer step without accumulation: Forward with dropout
// (training mode), Backward seeded with the GradScaler's scale, GradScaler.Unscale (FP16 only), amp.ClipGradNorm
// to MaxGradNorm, AdamW (trainer.AdamW: one fused update of the flat trainable buffer) unless the scaler skips,
// GradScaler.Update, WeightsUpdated and ZeroGrad.
type Spec struct {
	Model  string          // the name reported ("bert-base", "tiny", "smollm2-135m", a config path)
	Config bert.BertConfig // the BERT's shape, when Decoder is nil
	// Decoder, when set, is the shape of a causal LM (llama.ForCausalLM: Llama, Qwen2/3, Mistral) trained with
	// the shifted next-token cross-entropy on a synthetic batch whose labels are its ids (SyntheticCausalBatch);
	// Config is then unused. SetModel fills one or the other from a name.
	Decoder *llama.Config
	Batch   int        // B, sequences per step
	Seq     int        // T, tokens per sequence; every token is real (no padding)
	Policy  amp.Policy // FP32, FP16 (with a GradScaler) or BF16 autocast
	// LoRA, when set, adapts the model with lora.Apply before training (PEFT's get_peft_model); nil trains
	// every parameter.
	LoRA          *lora.Config
	Warmup, Steps int // untimed steps first (kernel compiles, allocator warm-up), then timed steps
	// LearningRate, WeightDecay and MaxGradNorm are AdamW's lr and weight_decay (betas 0.9, 0.999, eps 1e-8)
	// and the clipping norm (HF's learning_rate, weight_decay, max_grad_norm).
	LearningRate, WeightDecay, MaxGradNorm float64
	Seed                                   uint64 // weights, adapters, token ids, labels and dropout
	// Profile is the number of extra steps run after the timed ones with every op timed alone (Meter), for
	// Result.Breakdown; 0 for none.
	Profile int
	// AttnImplementation is the model's attn_implementation: "sdpa" (the default when empty) or "eager".
	AttnImplementation string
	// GradientCheckpointing recomputes each encoder layer in backward instead of keeping its activations
	// (HF's gradient_checkpointing; bert.BertForSequenceClassification.SetGradientCheckpointing).
	GradientCheckpointing bool
	// CUDAGraphs captures a step as a CUDA graph after the warm-up and replays it (cuda.StepGraph); a CUDA
	// backend only.
	CUDAGraphs bool
}

// DefaultSpec returns the defaults of `tune bench`: BERT-base, 32 × 128 tokens, BF16, 5 warm-up and 30 timed
// steps, AdamW lr 2e-5 without weight decay and clipping at 1.0 (transformers' Trainer defaults but the
// learning rate), seed 42.
func DefaultSpec() Spec {
	cfg, _ := ModelConfig("bert-base")
	return Spec{Model: "bert-base", Config: cfg, Batch: 32, Seq: 128, Policy: amp.BF16, Warmup: 5, Steps: 30,
		LearningRate: 2e-5, MaxGradNorm: 1, Seed: 42}
}

// LoRAConfig returns the adapter configuration tune bench uses for a BERT: PEFT's LoraConfig(r,
// lora_alpha=2r, lora_dropout=0, target_modules=targets, task_type=SEQ_CLS), which also trains the classifier.
// targets ["all-linear"] is PEFT's all-linear shorthand. For a causal LM use Spec.LoRAFor.
func LoRAConfig(r int, targets []string) lora.Config {
	c := lora.DefaultConfig()
	c.R, c.LoraAlpha = r, float64(2*r)
	c.TargetModules = targetModules(targets)
	c.TaskType = lora.TaskSeqCls
	return c
}

// LoRAFor returns the adapter configuration for s's model: PEFT's LoraConfig(r, lora_alpha=alpha (2r when
// alpha is 0), lora_dropout=0, target_modules=targets, task_type) with task_type SEQ_CLS for a BERT (the
// classifier trains too) and CAUSAL_LM for a causal LM. Empty targets leave target_modules unset: PEFT's default
// for the architecture (query,value for BERT; q_proj,v_proj for Llama and Qwen). ["all-linear"] is PEFT's
// shorthand for every Linear but the head.
func (s *Spec) LoRAFor(r int, alpha float64, targets []string) lora.Config {
	c := LoRAConfig(r, targets)
	if alpha != 0 {
		c.LoraAlpha = alpha
	}
	if len(targets) == 0 {
		c.TargetModules = lora.TargetModules{}
		if s.Decoder == nil {
			c.TargetModules = lora.TargetModules{Names: []string{"query", "value"}}
		}
	}
	c.TaskType = s.loraTask()
	return c
}

// targetModules reads a --lora-targets list: ["all-linear"] is the shorthand, anything else module names.
func targetModules(targets []string) lora.TargetModules {
	if len(targets) == 1 && targets[0] == lora.AllLinear {
		return lora.TargetModules{Regex: lora.AllLinear}
	}
	return lora.TargetModules{Names: slices.Clone(targets)}
}

// Validate reports every field of s that cannot run, joined.
func (s *Spec) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("bench: "+format, a...)) }
	if s.Batch <= 0 {
		bad("batch %d must be positive", s.Batch)
	}
	maxPos := s.Config.MaxPositionEmbeddings
	if s.Decoder != nil {
		maxPos = s.Decoder.MaxPositionEmbeddings
	}
	if s.Seq <= 0 || s.Seq > maxPos {
		bad("seq %d must be in [1, %d] (max_position_embeddings)", s.Seq, maxPos)
	} else if s.Batch > math.MaxInt32/s.Seq { // token ids are I32, the kernels' sizes 32-bit; the product must not wrap
		bad("batch %d × seq %d is %.4g tokens per step, more than %d; lower --batch", s.Batch, s.Seq,
			float64(s.Batch)*float64(s.Seq), math.MaxInt32)
	}
	if s.Steps <= 0 {
		bad("steps %d must be positive (30 or more for stable percentiles)", s.Steps)
	}
	if s.Warmup < 0 || s.Profile < 0 {
		bad("warmup %d and profile %d must not be negative", s.Warmup, s.Profile)
	}
	if !(s.LearningRate > 0) || s.WeightDecay < 0 || !(s.MaxGradNorm > 0) {
		bad("learning rate %g and max_grad_norm %g must be positive, weight decay %g not negative",
			s.LearningRate, s.MaxGradNorm, s.WeightDecay)
	}
	if err := s.Policy.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("bench: %w", err))
	}
	if s.Decoder != nil {
		if err := s.Decoder.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("bench: model %s: %w", s.Model, err))
		}
	} else if err := s.Config.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("bench: model %s: %w", s.Model, err))
	}
	if s.LoRA != nil {
		c := *s.LoRA
		c.Normalize()
		if err := c.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("bench: %w", err))
		}
		if c.TargetModules.IsSet() { // a typo is refused before the model is built, as in a recipe
			paths := bert.ProjectionPaths(s.Config)
			if s.Decoder != nil {
				paths = llama.ProjectionPaths(*s.Decoder)
			}
			if err := c.CheckTargets(paths); err != nil {
				errs = append(errs, fmt.Errorf("bench: --lora-targets for %s: %w", s.Model, err))
			}
		}
	}
	return errors.Join(errs...)
}
