package llama

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/tune-ml/tune/internal/smallfile"
	"github.com/tune-ml/tune/loaders"
)

// Rope types tune computes (transformers' modeling_rope_utils.py ROPE_INIT_FUNCTIONS "default" and "llama3").
const (
	RopeDefault = "default"
	RopeLlama3  = "llama3"
)

// RopeScaling is the rotary embedding's frequency scaling: rope_scaling in a v4 config.json, the non-theta keys
// of rope_parameters in a v5 one.
type RopeScaling struct {
	Type string // "default" or "llama3" (rope_type, or the older "type")
	// Factor, LowFreqFactor, HighFreqFactor and OriginalMaxPositionEmbeddings are llama3's parameters
	// (transformers' _compute_llama3_parameters): wavelengths above original/low_freq_factor are divided by
	// factor, those below original/high_freq_factor kept, and those between interpolated smoothly.
	Factor, LowFreqFactor, HighFreqFactor float64
	OriginalMaxPositionEmbeddings         int
}

// Config is a Llama-family decoder configuration: transformers' LlamaConfig and the configurations of the
// families that share its layers (Qwen2, Qwen3, Mistral), with the differences as options.
type Config struct {
	ModelType    string // "llama", "qwen2", "qwen3" or "mistral"
	Architecture string // the transformers class: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM

	VocabSize             int // V
	HiddenSize            int // C
	IntermediateSize      int // I, the MLP's inner width
	NumHiddenLayers       int // L decoder layers
	NumAttentionHeads     int // Hq
	NumKeyValueHeads      int // Hkv (grouped-query attention); Hq for multi-head attention
	HeadDim               int // D: head_dim when given, else hidden_size / num_attention_heads
	MaxPositionEmbeddings int // max_position_embeddings (recorded; positions beyond it are computed, as transformers does)

	RMSNormEps float64     // rms_norm_eps
	RopeTheta  float64     // rope_theta, the rotary base
	Rope       RopeScaling // the rope type and its parameters

	// QKVBias: q_proj, k_proj and v_proj have biases (Qwen2, or attention_bias in Llama/Qwen3).
	QKVBias bool
	// OBias: o_proj has a bias (attention_bias in Llama/Qwen3; never in Qwen2).
	OBias bool
	// MLPBias: gate_proj, up_proj and down_proj have biases (Llama's mlp_bias).
	MLPBias bool
	// QKNorm: an RMSNorm over each head's D features of q and k before RoPE (Qwen3's q_norm, k_norm).
	QKNorm bool

	TieWordEmbeddings bool    // lm_head shares embed_tokens' weight
	PadTokenID        int     // the embedding's padding_idx, -1 for none
	SlidingWindow     int     // the attention window when one is active, 0 for full attention
	InitializerRange  float64 // std of the normal init of fresh weights
	AttentionDropout  float64 // attention_dropout: must be 0 (tune does not apply dropout in decoders)

	raw map[string]json.RawMessage // the config.json read (nil for a fresh Config): unknown keys are saved back
}

// familyArch is the transformers class of each model_type tune builds.
var familyArch = map[string]string{
	"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "mistral": "MistralForCausalLM",
}

// ModelTypes are the config.json model_type values this package builds.
func ModelTypes() []string {
	ts := make([]string, 0, len(familyArch))
	for t := range familyArch {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

// NewConfig returns the defaults transformers' config class of modelType gives (LlamaConfig, Qwen2Config,
// Qwen3Config, MistralConfig) with the given sizes; heads divide hidden (head_dim = hidden / heads).
func NewConfig(modelType string, vocab, hidden, inter, layers, heads, kvHeads int) (Config, error) {
	arch, ok := familyArch[modelType]
	if !ok {
		return Config{}, fmt.Errorf("llama: model_type %q is not a Llama-family model; tune builds %s", modelType, strings.Join(ModelTypes(), ", "))
	}
	c := Config{
		ModelType: modelType, Architecture: arch, VocabSize: vocab, HiddenSize: hidden, IntermediateSize: inter,
		NumHiddenLayers: layers, NumAttentionHeads: heads, NumKeyValueHeads: kvHeads, MaxPositionEmbeddings: 2048,
		RMSNormEps: 1e-6, RopeTheta: 10000, Rope: RopeScaling{Type: RopeDefault}, PadTokenID: -1,
		InitializerRange: 0.02,
	}
	if heads > 0 {
		c.HeadDim = hidden / heads
	}
	switch modelType {
	case "qwen2":
		c.QKVBias, c.RopeTheta, c.MaxPositionEmbeddings = true, 10000, 32768
	case "qwen3":
		c.QKNorm, c.MaxPositionEmbeddings = true, 32768
	case "mistral":
		c.RMSNormEps, c.MaxPositionEmbeddings = 1e-6, 32768
	}
	return c, nil
}

// hfConfig is the part of config.json this package reads, v4 and v5 layouts both (transformers 5 writes
// rope_parameters and dtype; earlier versions rope_theta, rope_scaling and torch_dtype).
type hfConfig struct {
	ModelType             string          `json:"model_type"`
	Architectures         []string        `json:"architectures"`
	VocabSize             *int            `json:"vocab_size"`
	HiddenSize            *int            `json:"hidden_size"`
	IntermediateSize      *int            `json:"intermediate_size"`
	NumHiddenLayers       *int            `json:"num_hidden_layers"`
	NumAttentionHeads     *int            `json:"num_attention_heads"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads"`
	HeadDim               *int            `json:"head_dim"`
	MaxPositionEmbeddings *int            `json:"max_position_embeddings"`
	RMSNormEps            *float64        `json:"rms_norm_eps"`
	RopeTheta             *float64        `json:"rope_theta"`
	RopeScaling           json.RawMessage `json:"rope_scaling"`
	RopeParameters        json.RawMessage `json:"rope_parameters"`
	PartialRotaryFactor   *float64        `json:"partial_rotary_factor"`
	HiddenAct             *string         `json:"hidden_act"`
	AttentionBias         *bool           `json:"attention_bias"`
	MLPBias               *bool           `json:"mlp_bias"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings"`
	PadTokenID            json.RawMessage `json:"pad_token_id"`
	SlidingWindow         json.RawMessage `json:"sliding_window"`
	UseSlidingWindow      *bool           `json:"use_sliding_window"`
	LayerTypes            []string        `json:"layer_types"`
	InitializerRange      *float64        `json:"initializer_range"`
	AttentionDropout      *float64        `json:"attention_dropout"`
	PretrainingTP         *int            `json:"pretraining_tp"`
}

// ReadConfig reads dir/config.json (either layout) into a Config; every key tune cannot build from is an error
// naming the file and the key (see ParseConfig).
func ReadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, loaders.ConfigName)
	data, err := smallfile.Read(path)
	if err != nil {
		return Config{}, fmt.Errorf("llama: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("llama: %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses a config.json of model_type llama, qwen2, qwen3 or mistral. Absent keys take the defaults
// of the model_type's transformers config class. What tune does not build is an error naming the key and what
// is supported: another hidden_act than silu, a rope type other than default and llama3, a partial rotary
// factor, attention dropout, pretraining_tp > 1; and every size problem (Problems).
func ParseConfig(data []byte) (Config, error) {
	var h hfConfig
	if err := json.Unmarshal(data, &h); err != nil {
		return Config{}, describeJSONError(data, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, describeJSONError(data, err)
	}
	c, err := NewConfig(h.ModelType, 0, 0, 0, 0, 0, 0)
	if err != nil {
		return Config{}, fmt.Errorf("model_type: %w", err)
	}
	c.raw = raw
	if len(h.Architectures) > 0 && h.Architectures[0] != c.Architecture && strings.HasSuffix(h.Architectures[0], "ForCausalLM") {
		return Config{}, fmt.Errorf("architectures: %q does not match model_type %q (%s)", h.Architectures[0], c.ModelType, c.Architecture)
	}
	setInt := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setInt(&c.VocabSize, h.VocabSize)
	setInt(&c.HiddenSize, h.HiddenSize)
	setInt(&c.IntermediateSize, h.IntermediateSize)
	setInt(&c.NumHiddenLayers, h.NumHiddenLayers)
	setInt(&c.NumAttentionHeads, h.NumAttentionHeads)
	c.NumKeyValueHeads = c.NumAttentionHeads
	setInt(&c.NumKeyValueHeads, h.NumKeyValueHeads)
	setInt(&c.MaxPositionEmbeddings, h.MaxPositionEmbeddings)
	if c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	setInt(&c.HeadDim, h.HeadDim)
	if h.RMSNormEps != nil {
		c.RMSNormEps = *h.RMSNormEps
	}
	if h.InitializerRange != nil {
		c.InitializerRange = *h.InitializerRange
	}
	if h.AttentionDropout != nil {
		c.AttentionDropout = *h.AttentionDropout
	}
	if h.HiddenAct != nil && *h.HiddenAct != "silu" {
		return Config{}, fmt.Errorf("hidden_act: %q is not supported; tune's Llama-family MLP is SwiGLU with silu", *h.HiddenAct)
	}
	if h.PartialRotaryFactor != nil && *h.PartialRotaryFactor != 1 {
		return Config{}, fmt.Errorf("partial_rotary_factor: %v is not supported; tune rotates the whole head (1.0)", *h.PartialRotaryFactor)
	}
	if h.PretrainingTP != nil && *h.PretrainingTP > 1 {
		return Config{}, fmt.Errorf("pretraining_tp: %d is not supported; tune computes the projections whole (1)", *h.PretrainingTP)
	}
	if c.AttentionDropout != 0 {
		return Config{}, fmt.Errorf("attention_dropout: %v is not supported; tune's decoders train without attention dropout (0.0)", c.AttentionDropout)
	}
	bias := false
	if h.AttentionBias != nil {
		bias = *h.AttentionBias
	}
	switch c.ModelType {
	case "qwen2": // Qwen2Attention: q, k, v with bias=True, o_proj without
		c.QKVBias, c.OBias = true, false
	case "mistral": // MistralAttention: no biases
		if bias {
			return Config{}, errors.New("attention_bias: true is not supported for mistral (MistralAttention has no biases)")
		}
	default: // LlamaAttention, Qwen3Attention: bias=config.attention_bias on q, k, v and o
		c.QKVBias, c.OBias = bias, bias
	}
	if h.MLPBias != nil {
		if c.ModelType != "llama" && *h.MLPBias {
			return Config{}, fmt.Errorf("mlp_bias: true is only defined for llama")
		}
		c.MLPBias = *h.MLPBias
	}
	c.TieWordEmbeddings = c.ModelType != "llama" && c.ModelType != "mistral" // Qwen2/Qwen3 configs default to tied
	if h.TieWordEmbeddings != nil {
		c.TieWordEmbeddings = *h.TieWordEmbeddings
	}
	if c.PadTokenID, err = optionalID(h.PadTokenID); err != nil {
		return Config{}, fmt.Errorf("pad_token_id: %w", err)
	}
	if err := c.readRope(&h); err != nil {
		return Config{}, err
	}
	if err := c.readSlidingWindow(&h); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// optionalID reads an integer id that may be null or absent (-1).
func optionalID(v json.RawMessage) (int, error) {
	if len(v) == 0 || string(v) == "null" {
		return -1, nil
	}
	var id int
	if err := json.Unmarshal(v, &id); err != nil {
		return 0, fmt.Errorf("%s is not an integer id", v)
	}
	return id, nil
}

// readRope reads rope_theta and rope_scaling (v4) or rope_parameters (v5).
func (c *Config) readRope(h *hfConfig) error {
	if h.RopeTheta != nil {
		c.RopeTheta = *h.RopeTheta
	}
	key, block := "rope_scaling", h.RopeScaling
	if len(h.RopeParameters) > 0 && string(h.RopeParameters) != "null" {
		key, block = "rope_parameters", h.RopeParameters
	}
	if len(block) == 0 || string(block) == "null" {
		return nil
	}
	// transformers 5 keys rope_parameters by layer type for models with several ("full_attention",
	// "sliding_attention"); every layer here is full attention.
	var byType map[string]json.RawMessage
	if json.Unmarshal(block, &byType) == nil {
		if full, ok := byType["full_attention"]; ok && len(full) > 0 && full[0] == '{' {
			key, block = key+".full_attention", full
		}
	}
	var r struct {
		RopeTheta                     *float64 `json:"rope_theta"`
		Factor                        *float64 `json:"factor"`
		LowFreqFactor                 *float64 `json:"low_freq_factor"`
		HighFreqFactor                *float64 `json:"high_freq_factor"`
		OriginalMaxPositionEmbeddings *int     `json:"original_max_position_embeddings"`
		PartialRotaryFactor           *float64 `json:"partial_rotary_factor"`
	}
	if err := json.Unmarshal(block, &r); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	var rt struct {
		RopeType *string `json:"rope_type"`
		Type     *string `json:"type"`
	}
	_ = json.Unmarshal(block, &rt)
	typ := RopeDefault
	switch {
	case rt.RopeType != nil:
		typ = *rt.RopeType
	case rt.Type != nil:
		typ = *rt.Type
	}
	if r.RopeTheta != nil {
		c.RopeTheta = *r.RopeTheta
	}
	if r.PartialRotaryFactor != nil && *r.PartialRotaryFactor != 1 {
		return fmt.Errorf("%s.partial_rotary_factor: %v is not supported; tune rotates the whole head (1.0)", key, *r.PartialRotaryFactor)
	}
	switch typ {
	case RopeDefault:
		c.Rope = RopeScaling{Type: RopeDefault}
	case RopeLlama3:
		need := map[string]bool{"factor": r.Factor != nil, "low_freq_factor": r.LowFreqFactor != nil,
			"high_freq_factor": r.HighFreqFactor != nil, "original_max_position_embeddings": r.OriginalMaxPositionEmbeddings != nil}
		for _, k := range []string{"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"} {
			if !need[k] {
				return fmt.Errorf("%s.%s: missing; rope_type llama3 needs factor, low_freq_factor, high_freq_factor and original_max_position_embeddings", key, k)
			}
		}
		c.Rope = RopeScaling{Type: RopeLlama3, Factor: *r.Factor, LowFreqFactor: *r.LowFreqFactor,
			HighFreqFactor: *r.HighFreqFactor, OriginalMaxPositionEmbeddings: *r.OriginalMaxPositionEmbeddings}
		if !(c.Rope.Factor >= 1) || !(c.Rope.LowFreqFactor > 0) || !(c.Rope.HighFreqFactor > c.Rope.LowFreqFactor) || c.Rope.OriginalMaxPositionEmbeddings <= 0 {
			return fmt.Errorf("%s: llama3 parameters %+v: want factor ≥ 1, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0", key, c.Rope)
		}
	default:
		return fmt.Errorf("%s.rope_type: %q is not supported; tune computes rope types %q and %q", key, typ, RopeDefault, RopeLlama3)
	}
	return nil
}

// readSlidingWindow records an active sliding window (Mistral's sliding_window; Qwen2/Qwen3 only with
// use_sliding_window or sliding_attention layer types). Forward refuses sequences longer than it.
func (c *Config) readSlidingWindow(h *hfConfig) error {
	w, err := optionalID(h.SlidingWindow)
	if err != nil {
		return fmt.Errorf("sliding_window: %w", err)
	}
	if w < 0 {
		return nil
	}
	active := c.ModelType == "mistral"
	if h.UseSlidingWindow != nil {
		active = *h.UseSlidingWindow
	}
	if slices.Contains(h.LayerTypes, "sliding_attention") {
		active = true
	}
	if c.ModelType == "llama" {
		active = false
	}
	if active {
		if w <= 0 {
			return fmt.Errorf("sliding_window: %d must be positive", w)
		}
		c.SlidingWindow = w
	}
	return nil
}

// Validate returns an error naming the first key a model cannot be built from.
func (c *Config) Validate() error {
	pos := []struct {
		key string
		v   int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads}, {"head_dim", c.HeadDim},
		{"max_position_embeddings", c.MaxPositionEmbeddings},
	}
	for _, p := range pos {
		if p.v <= 0 {
			return fmt.Errorf("%s: %d must be positive", p.key, p.v)
		}
		if p.v > 1<<24 {
			return fmt.Errorf("%s: %d is larger than tune builds (at most %d)", p.key, p.v, 1<<24)
		}
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("num_key_value_heads: %d must divide num_attention_heads %d", c.NumKeyValueHeads, c.NumAttentionHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("head_dim: %d must be even (rotary embeddings rotate pairs)", c.HeadDim)
	}
	if !(c.RMSNormEps > 0) || math.IsInf(c.RMSNormEps, 0) {
		return fmt.Errorf("rms_norm_eps: %v must be positive and finite", c.RMSNormEps)
	}
	if !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) {
		return fmt.Errorf("rope_theta: %v must be positive and finite", c.RopeTheta)
	}
	if c.PadTokenID >= c.VocabSize {
		return fmt.Errorf("pad_token_id: %d is outside the vocabulary (vocab_size %d)", c.PadTokenID, c.VocabSize)
	}
	if !(c.InitializerRange >= 0) {
		return fmt.Errorf("initializer_range: %v must be ≥ 0", c.InitializerRange)
	}
	return nil
}

// QDim is the query projection's width Hq·D; KVDim the key and value projections' Hkv·D.
func (c *Config) QDim() int { return c.NumAttentionHeads * c.HeadDim }

// KVDim is the key and value projections' width Hkv·D.
func (c *Config) KVDim() int { return c.NumKeyValueHeads * c.HeadDim }

// NumParameters returns the model's parameter count (the tied head counted once).
func (c *Config) NumParameters() int64 {
	C, I := int64(c.HiddenSize), int64(c.IntermediateSize)
	q, kv := int64(c.QDim()), int64(c.KVDim())
	per := C + C + C*q + 2*C*kv + q*C + 3*C*I
	if c.QKVBias {
		per += q + 2*kv
	}
	if c.OBias {
		per += C
	}
	if c.MLPBias {
		per += 2*I + C
	}
	if c.QKNorm {
		per += 2 * int64(c.HeadDim)
	}
	n := int64(c.VocabSize)*C + int64(c.NumHiddenLayers)*per + C
	if !c.TieWordEmbeddings {
		n += int64(c.VocabSize) * C
	}
	return n
}

// configJSON returns config.json for the model: the file it was read from with tune's values written over
// (unknown keys kept, the layout — v4 rope_scaling/torch_dtype or v5 rope_parameters/dtype — kept), or a v4
// layout for a fresh Config, which transformers 4 and 5 both read. dtype is "float32": tune saves its FP32
// masters.
func (c *Config) configJSON() ([]byte, error) {
	out := map[string]any{}
	for k, v := range c.raw {
		out[k] = v
	}
	v5 := false
	if _, ok := c.raw["rope_parameters"]; ok {
		v5 = true
	}
	if _, ok := c.raw["dtype"]; ok && c.raw["torch_dtype"] == nil {
		v5 = true
	}
	out["model_type"] = c.ModelType
	out["architectures"] = []string{c.Architecture}
	out["vocab_size"] = c.VocabSize
	out["hidden_size"] = c.HiddenSize
	out["intermediate_size"] = c.IntermediateSize
	out["num_hidden_layers"] = c.NumHiddenLayers
	out["num_attention_heads"] = c.NumAttentionHeads
	out["num_key_value_heads"] = c.NumKeyValueHeads
	out["head_dim"] = c.HeadDim
	out["max_position_embeddings"] = c.MaxPositionEmbeddings
	out["rms_norm_eps"] = c.RMSNormEps
	out["hidden_act"] = "silu"
	out["tie_word_embeddings"] = c.TieWordEmbeddings
	out["initializer_range"] = c.InitializerRange
	if c.ModelType != "qwen2" {
		out["attention_bias"] = c.OBias
	}
	if c.ModelType == "llama" {
		out["mlp_bias"] = c.MLPBias
	}
	if c.PadTokenID >= 0 {
		out["pad_token_id"] = c.PadTokenID
	}
	rope := map[string]any{"rope_type": c.Rope.Type}
	if c.Rope.Type == RopeLlama3 {
		rope["factor"] = c.Rope.Factor
		rope["low_freq_factor"] = c.Rope.LowFreqFactor
		rope["high_freq_factor"] = c.Rope.HighFreqFactor
		rope["original_max_position_embeddings"] = c.Rope.OriginalMaxPositionEmbeddings
	}
	if v5 {
		rope["rope_theta"] = c.RopeTheta
		out["rope_parameters"] = rope
		out["dtype"] = "float32"
		delete(out, "torch_dtype")
		delete(out, "rope_theta")
		delete(out, "rope_scaling")
	} else {
		out["rope_theta"] = c.RopeTheta
		if c.Rope.Type == RopeDefault {
			out["rope_scaling"] = nil
		} else {
			out["rope_scaling"] = rope
		}
		out["torch_dtype"] = "float32"
	}
	return json.MarshalIndent(out, "", "  ")
}

// describeJSONError names where config.json breaks ("invalid JSON: line 2 column 18: ...") or which key has a
// value of the wrong type (`line 2 column 21: "hidden_size": want an integer, got a string`).
func describeJSONError(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON: %w", loaders.DescribeJSONError(data, err))
	}
	return loaders.DescribeJSONError(data, err)
}
