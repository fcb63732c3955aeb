package lora

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/internal/smallfile"
	"github.com/tune-ml/tune/loaders"
)

// AdapterConfigName is the file PEFT's save_pretrained writes the LoraConfig to.
const AdapterConfigName = "adapter_config.json"

// PEFTVersion is the PEFT release whose adapter_config.json layout tune writes (peft/tuners/lora/config.py).
const PEFTVersion = "0.21.0"

// MarshalAdapterConfig returns c as PEFT 0.21's save_pretrained writes it (peft/tuners/lora/config.py): peft_type "LORA",
// inference_mode true, the LoRA variants tune does not implement at their off values (use_dora false,
// lora_bias false, layers_to_transform null, rank_pattern {} ...), keys sorted, two-space indent. baseModel is
// base_model_name_or_path; "" writes null. target_modules is written as c holds it (call Normalize first, as
// PEFT's wrapping would).
func MarshalAdapterConfig(c Config, baseModel string) ([]byte, error) {
	var base any
	if baseModel != "" {
		base = baseModel
	}
	var task any
	if c.TaskType != "" {
		task = c.TaskType
	}
	var toSave any
	if c.ModulesToSave != nil {
		toSave = c.ModulesToSave
	}
	bias := c.Bias
	if bias == "" {
		bias = BiasNone
	}
	init := c.InitLoraWeights
	if init == "" {
		init = InitDefault
	}
	// A map marshals with sorted keys, which is what PEFT's json.dumps(sort_keys=True) gives.
	m := map[string]any{
		"peft_type":               "LORA",
		"peft_version":            PEFTVersion,
		"task_type":               task,
		"base_model_name_or_path": base,
		"inference_mode":          true,
		"r":                       c.R,
		"lora_alpha":              c.LoraAlpha,
		"lora_dropout":            c.LoraDropout,
		"target_modules":          c.TargetModules,
		"modules_to_save":         toSave,
		"bias":                    bias,
		"fan_in_fan_out":          c.FanInFanOut,
		"use_rslora":              c.UseRSLoRA,
		"init_lora_weights":       init,
		"lora_bias":               false,
		"use_dora":                false,
		"layers_to_transform":     nil,
		"layers_pattern":          nil,
		"exclude_modules":         nil,
		"rank_pattern":            map[string]any{},
		"alpha_pattern":           map[string]any{},
		"loftq_config":            map[string]any{},
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("lora: encoding %s: %w", AdapterConfigName, err)
	}
	return append(b, '\n'), nil
}

// WriteAdapterConfig writes dir/adapter_config.json for c (see MarshalAdapterConfig) through a temporary file
// renamed into place, so a reader never sees a partial file.
func WriteAdapterConfig(dir string, c Config, baseModel string) error {
	b, err := MarshalAdapterConfig(c, baseModel)
	if err != nil {
		return err
	}
	// 0644: a saved adapter is as readable as any output.
	if err := atomicfile.WriteFile(filepath.Join(dir, AdapterConfigName), b, 0o644); err != nil {
		return errctx.Wrap("lora", err)
	}
	return nil
}

// adapterFile is what ReadAdapterConfig reads: the Config fields plus the PEFT fields tune checks are off.
type adapterFile struct {
	Config
	PEFTType          string          `json:"peft_type"`
	BaseModel         *string         `json:"base_model_name_or_path"`
	TaskType          *string         `json:"task_type"`
	UseDoRA           bool            `json:"use_dora"`
	LoraBias          bool            `json:"lora_bias"`
	UseQALoRA         bool            `json:"use_qalora"`
	LayersToTransform json.RawMessage `json:"layers_to_transform"`
	LayersPattern     json.RawMessage `json:"layers_pattern"`
	ExcludeModules    json.RawMessage `json:"exclude_modules"`
	LayerReplication  json.RawMessage `json:"layer_replication"`
	TargetParameters  json.RawMessage `json:"target_parameters"`
	TrainableTokens   json.RawMessage `json:"trainable_token_indices"`
	RankPattern       json.RawMessage `json:"rank_pattern"`
	AlphaPattern      json.RawMessage `json:"alpha_pattern"`
}

// ParseAdapterConfig reads an adapter_config.json written by PEFT or by tune and returns the Config and
// base_model_name_or_path. Missing fields take PEFT's defaults (DefaultConfig); fields tune does not know are
// ignored. It errors when peft_type is not LORA or when a LoRA variant tune does not implement is switched on
// (use_dora, lora_bias, layers_to_transform, rank_pattern, ...), naming the field, and when Validate fails.
func ParseAdapterConfig(data []byte) (Config, string, error) {
	f := adapterFile{Config: DefaultConfig()}
	if err := json.Unmarshal(data, &f); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return Config{}, "", fmt.Errorf("lora: %s: invalid JSON: %w", AdapterConfigName, loaders.DescribeJSONError(data, err))
		}
		return Config{}, "", fmt.Errorf("lora: %s: %w", AdapterConfigName, loaders.DescribeJSONError(data, err))
	}
	if f.PEFTType != "LORA" {
		return Config{}, "", fmt.Errorf("lora: %s: peft_type is %q; tune reads LoRA adapters only (peft_type \"LORA\")",
			AdapterConfigName, f.PEFTType)
	}
	c := f.Config
	if f.TaskType != nil {
		c.TaskType = *f.TaskType
	}
	for _, on := range []struct {
		key string
		on  bool
	}{
		{"use_dora", f.UseDoRA},
		{"lora_bias", f.LoraBias},
		{"use_qalora", f.UseQALoRA},
		{"layers_to_transform", isSet(f.LayersToTransform)},
		{"layers_pattern", isSet(f.LayersPattern)},
		{"exclude_modules", isSet(f.ExcludeModules)},
		{"layer_replication", isSet(f.LayerReplication)},
		{"target_parameters", isSet(f.TargetParameters)},
		{"trainable_token_indices", isSet(f.TrainableTokens)},
		{"rank_pattern", isSet(f.RankPattern)},
		{"alpha_pattern", isSet(f.AlphaPattern)},
	} {
		if on.on {
			return Config{}, "", fmt.Errorf("lora: %s: %s is set; tune does not implement that LoRA variant",
				AdapterConfigName, on.key)
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, "", errctx.Wrapf(err, "lora: %s", AdapterConfigName)
	}
	base := ""
	if f.BaseModel != nil {
		base = *f.BaseModel
	}
	return c, base, nil
}

// ReadAdapterConfig reads dir/adapter_config.json (see ParseAdapterConfig).
func ReadAdapterConfig(dir string) (Config, string, error) {
	p := filepath.Join(dir, AdapterConfigName)
	data, err := smallfile.Read(p)
	if err != nil {
		return Config{}, "", fmt.Errorf("lora: reading the adapter config: %w", err)
	}
	c, base, err := ParseAdapterConfig(data)
	if err != nil {
		return Config{}, "", fmt.Errorf("%w (file %s)", err, p)
	}
	return c, base, nil
}

// isSet reports whether a raw JSON value is present and not null, {}, [] or "".
func isSet(raw json.RawMessage) bool {
	v := bytes.TrimSpace(raw)
	for _, off := range []string{"", "null", "{}", "[]", `""`} {
		if string(v) == off {
			return false
		}
	}
	return true
}
