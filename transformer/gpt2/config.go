package gpt2

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/smallfile"
	"github.com/tune-ml/tune/loaders"
)

// Config is a GPT-2 model's configuration with transformers' field names and defaults (GPT2Config in
// transformers/models/gpt2/configuration_gpt2.py). Build it with DefaultConfig and change fields, or read a
// checkpoint's config.json with ReadConfig / ParseConfig, which keep every other key for writing back.
type Config struct {
	VocabSize        int     // V, vocab_size (50257)
	NPositions       int     // P, n_positions: the longest sequence (1024)
	NEmbd            int     // C, n_embd (768)
	NLayer           int     // L, n_layer (12)
	NHead            int     // H, n_head (12); D = C/H
	NInner           int     // I, n_inner; 0 (null in config.json) means 4·C
	ActivationFunc   string  // activation_function: gelu_new (default), gelu_pytorch_tanh, gelu_fast or gelu
	ResidPdrop       float64 // resid_pdrop (0.1): dropout after each block's projections
	EmbdPdrop        float64 // embd_pdrop (0.1): dropout after the embeddings
	AttnPdrop        float64 // attn_pdrop (0.1): dropout on the attention probabilities
	LayerNormEpsilon float64 // layer_norm_epsilon (1e-5)
	InitializerRange float64 // initializer_range (0.02)
	// ScaleAttnWeights divides the attention scores by √D (scale_attn_weights, default true).
	ScaleAttnWeights bool
	// ScaleAttnByInverseLayerIdx further divides layer i's scores by i+1 (scale_attn_by_inverse_layer_idx).
	ScaleAttnByInverseLayerIdx bool
	// ReorderAndUpcastAttn is reorder_and_upcast_attn: computing the scores in FP32, which tune's attention
	// always does, so it changes nothing here.
	ReorderAndUpcastAttn bool
	// TieWordEmbeddings shares lm_head.weight with transformer.wte.weight (tie_word_embeddings, default true).
	TieWordEmbeddings bool
	// AddCrossAttention is add_cross_attention: encoder-decoder use, which tune does not build.
	AddCrossAttention bool

	raw map[string]json.RawMessage // every key of the config.json it was read from (nil for DefaultConfig)
}

// DefaultConfig returns GPT2Config()'s defaults: the gpt2 (124M) shape.
func DefaultConfig() Config {
	return Config{VocabSize: 50257, NPositions: 1024, NEmbd: 768, NLayer: 12, NHead: 12, ActivationFunc: "gelu_new",
		ResidPdrop: 0.1, EmbdPdrop: 0.1, AttnPdrop: 0.1, LayerNormEpsilon: 1e-5, InitializerRange: 0.02,
		ScaleAttnWeights: true, TieWordEmbeddings: true}
}

// Inner returns the MLP width I: n_inner, or 4·C when it is unset.
func (c Config) Inner() int {
	if c.NInner > 0 {
		return c.NInner
	}
	return 4 * c.NEmbd
}

// HeadDim returns D = C/H.
func (c Config) HeadDim() int { return c.NEmbd / max(c.NHead, 1) }

// activationFuncs maps activation_function to the op that computes it: the tanh approximation (gelu_new and
// gelu_pytorch_tanh are the same function; gelu_fast writes it as 0.5·x·(1 + tanh(x·0.7978845608·(1 +
// 0.044715·x²)))) or the exact erf form.
var activationFuncs = map[string]bool{"gelu_new": true, "gelu_pytorch_tanh": true, "gelu_fast": true, "gelu": false}

// tanhGELU reports whether the activation is the tanh approximation (else the exact erf GELU).
func (c Config) tanhGELU() bool { return activationFuncs[c.ActivationFunc] }

// Problems lists every setting a model cannot be built from, each naming its config.json key.
func (c Config) Problems() []string {
	var p []string
	pos := func(key string, v int) {
		if v <= 0 {
			p = append(p, fmt.Sprintf("%s = %d, want > 0", key, v))
		}
	}
	pos("vocab_size", c.VocabSize)
	pos("n_positions", c.NPositions)
	pos("n_embd", c.NEmbd)
	pos("n_layer", c.NLayer)
	pos("n_head", c.NHead)
	if c.NInner < 0 {
		p = append(p, fmt.Sprintf("n_inner = %d, want > 0 or null (4·n_embd)", c.NInner))
	}
	if c.NHead > 0 && c.NEmbd%c.NHead != 0 {
		p = append(p, fmt.Sprintf("n_embd = %d is not a multiple of n_head = %d", c.NEmbd, c.NHead))
	}
	if _, ok := activationFuncs[c.ActivationFunc]; !ok {
		keys := slices.Sorted(maps.Keys(activationFuncs))
		p = append(p, fmt.Sprintf("activation_function %q is not supported; tune's GPT-2 supports %s", c.ActivationFunc,
			strings.Join(keys, ", ")))
	}
	for _, d := range []struct {
		key string
		v   float64
	}{{"resid_pdrop", c.ResidPdrop}, {"embd_pdrop", c.EmbdPdrop}, {"attn_pdrop", c.AttnPdrop}} {
		if !(d.v >= 0 && d.v < 1) {
			p = append(p, fmt.Sprintf("%s = %v, want 0 ≤ p < 1", d.key, d.v))
		}
	}
	if !(c.LayerNormEpsilon > 0) {
		p = append(p, fmt.Sprintf("layer_norm_epsilon = %v, want > 0", c.LayerNormEpsilon))
	}
	if !(c.InitializerRange >= 0) {
		p = append(p, fmt.Sprintf("initializer_range = %v, want ≥ 0", c.InitializerRange))
	}
	if c.AddCrossAttention {
		p = append(p, "add_cross_attention = true: cross-attention (an encoder-decoder GPT-2) is not supported; tune builds GPT2LMHeadModel")
	}
	return p
}

// Validate returns the Problems as one error, or nil.
func (c Config) Validate() error {
	if p := c.Problems(); len(p) > 0 {
		return errors.New("gpt2: config: " + strings.Join(p, "; "))
	}
	return nil
}

// ReadConfig reads dir/config.json (ParseConfig).
func ReadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, loaders.ConfigName)
	data, err := smallfile.Read(path)
	if err != nil {
		return Config{}, fmt.Errorf("gpt2: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig decodes a GPT-2 config.json (name is its path, for messages): every known key type-checked,
// absent keys taking GPT2Config's defaults, unknown keys kept for ToJSON; then Validate. A model_type other
// than "gpt2" is an error.
func ParseConfig(name string, data []byte) (Config, error) {
	c := DefaultConfig()
	if err := json.Unmarshal(data, &c.raw); err != nil {
		return c, fmt.Errorf("gpt2: %s: %w", name, err)
	}
	if c.raw == nil {
		return c, fmt.Errorf("gpt2: %s: want a JSON object", name)
	}
	d := decoder{raw: c.raw}
	var mt string
	if d.str("model_type", &mt) && mt != "gpt2" {
		return c, fmt.Errorf("gpt2: %s: model_type %q, want \"gpt2\"", name, mt)
	}
	d.int("vocab_size", &c.VocabSize, false)
	d.int("n_positions", &c.NPositions, false)
	d.int("n_embd", &c.NEmbd, false)
	d.int("n_layer", &c.NLayer, false)
	d.int("n_head", &c.NHead, false)
	d.int("n_inner", &c.NInner, true)
	d.str("activation_function", &c.ActivationFunc)
	d.float("resid_pdrop", &c.ResidPdrop)
	d.float("embd_pdrop", &c.EmbdPdrop)
	d.float("attn_pdrop", &c.AttnPdrop)
	d.float("layer_norm_epsilon", &c.LayerNormEpsilon)
	d.float("initializer_range", &c.InitializerRange)
	d.bool("scale_attn_weights", &c.ScaleAttnWeights)
	d.bool("scale_attn_by_inverse_layer_idx", &c.ScaleAttnByInverseLayerIdx)
	d.bool("reorder_and_upcast_attn", &c.ReorderAndUpcastAttn)
	d.bool("tie_word_embeddings", &c.TieWordEmbeddings)
	d.bool("add_cross_attention", &c.AddCrossAttention)
	if d.err != nil {
		return c, fmt.Errorf("gpt2: %s: %w", name, d.err)
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%w (in %s)", err, name)
	}
	return c, nil
}

// decoder type-checks known keys of a config.json object; the first error sticks and names the key.
type decoder struct {
	raw map[string]json.RawMessage
	err error
}

// take decodes key into dst when it is present and not null (null is an error unless nullable) and reports
// whether it stored a value.
func (d *decoder) take(key, what string, nullable bool, dst any) bool {
	v, ok := d.raw[key]
	if !ok || d.err != nil {
		return false
	}
	if string(v) == "null" {
		if !nullable {
			d.err = fmt.Errorf("%q: want %s, got null", key, what)
		}
		return false
	}
	if err := json.Unmarshal(v, dst); err != nil {
		d.err = fmt.Errorf("%q: want %s, got %s", key, what, v)
		return false
	}
	return true
}

func (d *decoder) int(key string, dst *int, nullable bool) {
	var raw json.RawMessage
	if !d.take(key, "an integer", nullable, &raw) {
		return
	}
	v, err := strconv.Atoi(string(raw))
	if err != nil {
		d.err = fmt.Errorf("%q: want an integer, got %s", key, raw)
		return
	}
	*dst = v
}

func (d *decoder) float(key string, dst *float64) { d.take(key, "a number", false, dst) }
func (d *decoder) bool(key string, dst *bool)     { d.take(key, "true or false", false, dst) }
func (d *decoder) str(key string, dst *string) bool {
	return d.take(key, "a string", false, dst)
}

// ToJSON returns config.json for c as GPT2Config.save_pretrained writes it: the keys of the file c was read
// from (unknown ones kept) with c's values, model_type "gpt2" and architectures ["GPT2LMHeadModel"], sorted
// and indented.
func (c Config) ToJSON() ([]byte, error) {
	out := maps.Clone(c.raw)
	if out == nil {
		out = map[string]json.RawMessage{}
	}
	set := func(key string, v any) {
		b, _ := json.Marshal(v)
		out[key] = b
	}
	var inner any
	if c.NInner > 0 {
		inner = c.NInner
	}
	set("model_type", "gpt2")
	set("architectures", []string{"GPT2LMHeadModel"})
	set("vocab_size", c.VocabSize)
	set("n_positions", c.NPositions)
	set("n_embd", c.NEmbd)
	set("n_layer", c.NLayer)
	set("n_head", c.NHead)
	set("n_inner", inner)
	set("activation_function", c.ActivationFunc)
	set("resid_pdrop", c.ResidPdrop)
	set("embd_pdrop", c.EmbdPdrop)
	set("attn_pdrop", c.AttnPdrop)
	set("layer_norm_epsilon", c.LayerNormEpsilon)
	set("initializer_range", c.InitializerRange)
	set("scale_attn_weights", c.ScaleAttnWeights)
	set("scale_attn_by_inverse_layer_idx", c.ScaleAttnByInverseLayerIdx)
	set("reorder_and_upcast_attn", c.ReorderAndUpcastAttn)
	set("tie_word_embeddings", c.TieWordEmbeddings)
	set("add_cross_attention", c.AddCrossAttention)
	data, err := json.Marshal(out) // map keys sorted
	if err != nil {
		return nil, fmt.Errorf("gpt2: config: %w", err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, data, "", "  "); err != nil {
		return nil, fmt.Errorf("gpt2: config: %w", err)
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// WriteConfig writes dir/config.json (ToJSON) through a temporary file and a rename.
func (c Config) WriteConfig(dir string) error {
	data, err := c.ToJSON()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, loaders.ConfigName), data, 0o644); err != nil {
		return fmt.Errorf("gpt2: writing config: %w", err)
	}
	return nil
}
