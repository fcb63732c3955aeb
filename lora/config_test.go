package lora

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// bertLinearPaths returns the full names of every Linear module of a BertForSequenceClassification with
// layers encoder layers, in model order (14 for 2 layers: 6 per layer, the pooler, the classifier).
func bertLinearPaths(layers int) []string {
	var paths []string
	for l := range layers {
		p := fmt.Sprintf("bert.encoder.layer.%d.", l)
		paths = append(paths,
			p+"attention.self.query", p+"attention.self.key", p+"attention.self.value",
			p+"attention.output.dense", p+"intermediate.dense", p+"output.dense")
	}
	return append(paths, "bert.pooler.dense", "classifier")
}

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	want := Config{R: 8, LoraAlpha: 8, LoraDropout: 0, Bias: "none", InitLoraWeights: InitDefault}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("DefaultConfig() = %+v, want PEFT's defaults %+v", c, want)
	}
	if got := c.Targets(); !reflect.DeepEqual(got.Names, []string{"query", "value"}) {
		t.Errorf("unset target_modules for BERT = %v, want [query value]", got)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

// TestTargetModulesB27 checks PEFT's target_modules matching (check_target_module_exists in peft/tuners/tuners_utils.py) on a 2-layer BERT: the list and the regex give the same 4 modules, the
// scalar "query" targets nothing, all-linear gives 13 (the classifier excluded).
func TestTargetModulesB27(t *testing.T) {
	paths := bertLinearPaths(2)
	qv := []string{
		"bert.encoder.layer.0.attention.self.query", "bert.encoder.layer.0.attention.self.value",
		"bert.encoder.layer.1.attention.self.query", "bert.encoder.layer.1.attention.self.value",
	}
	for _, c := range []struct {
		name    string
		yaml    string
		toSave  []string
		want    []string
		wantN   int
		wantErr string
	}{
		{"a list matches by name: 4 modules", "[query, value]", nil, qv, 4, ""},
		{"a scalar is a regex that must match the whole path: nothing", "query", nil, nil, 0, "no modules were targeted"},
		{"a full-match regex: the same 4 modules", `'.*\.(query|value)'`, nil, qv, 4, ""},
		{"all-linear: 13 modules, the classifier excluded", "all-linear", []string{"classifier"}, nil, 13, ""},
		{"all-linear excludes the head even without modules_to_save", "all-linear", nil, nil, 13, ""},
		{"a list entry 'dense' also hits the pooler (suffix rule)", "[dense]", nil, nil, 7, ""},
		{"a list entry must match a whole path component", "[uery]", nil, nil, 0, "no modules were targeted"},
		{"modules_to_save are never targeted", "[classifier, query]", []string{"classifier"}, nil, 2, ""},
		{"unset means [query, value]", "null", nil, qv, 4, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ModulesToSave = c.toSave
			if err := yaml.Unmarshal([]byte("target_modules: "+c.yaml), &cfg); err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			got, err := cfg.Select(paths)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.Is(err, ErrNoTargets) {
					t.Fatalf("want error %q, got %v (targets %v)", c.wantErr, err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != c.wantN {
				t.Errorf("%d modules targeted, want %d: %v", len(got), c.wantN, got)
			}
			if c.want != nil && !slices.Equal(got, c.want) {
				t.Errorf("targets %v, want %v", got, c.want)
			}
			if slices.Contains(got, "classifier") {
				t.Errorf("the classification head was targeted: %v", got)
			}
		})
	}
}

// TestTargetModulesYAMLScalarNotSplit: a YAML scalar stays one string (PEFT's bug turned "all-linear" into a
// set of characters, PEFT's target_modules matching, check_target_module_exists in peft/tuners/tuners_utils.py), a sequence stays a list, and both survive a YAML and JSON round trip.
func TestTargetModulesYAMLScalarNotSplit(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       TargetModules
		json       string
	}{
		{"plain scalar", "all-linear", TargetModules{Regex: "all-linear"}, `"all-linear"`},
		{"quoted regex", `".*\\.query"`, TargetModules{Regex: `.*\.query`}, `".*\\.query"`},
		{"block list", "\n  - query\n  - value", TargetModules{Names: []string{"query", "value"}}, `["query","value"]`},
		{"empty list is set and targets nothing", "[]", TargetModules{Names: []string{}}, `[]`},
		{"null is unset", "~", TargetModules{}, `null`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cfg Config
			if err := yaml.Unmarshal([]byte("target_modules: "+c.yaml), &cfg); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.TargetModules, c.want) {
				t.Fatalf("decoded %#v, want %#v", cfg.TargetModules, c.want)
			}
			j, err := json.Marshal(cfg.TargetModules)
			if err != nil || string(j) != c.json {
				t.Errorf("JSON %s (%v), want %s", j, err, c.json)
			}
			var back TargetModules
			if err := json.Unmarshal(j, &back); err != nil || !reflect.DeepEqual(back, c.want) {
				t.Errorf("JSON round trip gave %#v (%v)", back, err)
			}
			y, err := yaml.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var again Config
			if err := yaml.Unmarshal(y, &again); err != nil || !reflect.DeepEqual(again.TargetModules, c.want) {
				t.Errorf("YAML round trip of\n%s gave %#v (%v)", y, again.TargetModules, err)
			}
		})
	}
	var cfg Config
	for _, bad := range []string{"target_modules: 3", "target_modules: {a: b}", "target_modules: [[a]]"} {
		if err := yaml.Unmarshal([]byte(bad), &cfg); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: want an error naming line 1, got %v", bad, err)
		}
	}
}

func TestScaling(t *testing.T) {
	for _, c := range []struct {
		name   string
		r      int
		alpha  float64
		rslora bool
		want   float64
	}{
		{"alpha/r: 16/8 = 2 (peft/tuners/lora/layer.py)", 8, 16, false, 2},
		{"rslora alpha/√r: 16/√16 = 4 (peft/tuners/lora/layer.py)", 16, 16, true, 4},
		{"defaults: 8/8 = 1", 8, 8, false, 1},
		{"rslora with a non-square rank", 8, 16, true, 16 / math.Sqrt(8)},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{R: c.r, LoraAlpha: c.alpha, UseRSLoRA: c.rslora}
			if got := cfg.Scaling(); math.Abs(got-c.want) > 1e-15 {
				t.Errorf("Scaling() = %v, want %v", got, c.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(c *Config)
		key  string
	}{
		{"r 0", func(c *Config) { c.R = 0 }, "r"},
		{"alpha 0", func(c *Config) { c.LoraAlpha = 0 }, "lora_alpha"},
		{"alpha inf", func(c *Config) { c.LoraAlpha = math.Inf(1) }, "lora_alpha"},
		// PEFT accepts any float; tune multiplies the adapters by scaling = lora_alpha/r in FP32, where 1e308/8 is
		// +Inf (the first step was NaN and blamed the data) and 1e-40/8 is 0.
		{"alpha 1e308: scaling +Inf in FP32", func(c *Config) { c.LoraAlpha = 1e308 }, "lora_alpha"},
		{"alpha 1e-40: scaling 0 in FP32", func(c *Config) { c.LoraAlpha = 1e-40 }, "lora_alpha"},
		{"alpha 1e39 with use_rslora and r 100: scaling 1e38 is fine", func(c *Config) { c.LoraAlpha, c.R, c.UseRSLoRA = 1e39, 100, true }, ""},
		{"alpha 1e39 with use_rslora and r 1: scaling 1e39", func(c *Config) { c.LoraAlpha, c.R, c.UseRSLoRA = 1e39, 1, true }, "lora_alpha"},
		{"dropout 1", func(c *Config) { c.LoraDropout = 1 }, "lora_dropout"},
		{"dropout NaN", func(c *Config) { c.LoraDropout = math.NaN() }, "lora_dropout"},
		{"bias typo", func(c *Config) { c.Bias = "lora-only" }, "bias"},
		{"unsupported init", func(c *Config) { c.InitLoraWeights = "pissa" }, "init_lora_weights"},
		{"unknown task type", func(c *Config) { c.TaskType = "SEQ_CLASSIFICATION" }, "task_type"},
		{"regex Go cannot compile (look-ahead)", func(c *Config) { c.TargetModules = TargetModules{Regex: `.*(?!query)`} }, "target_modules"},
		{"empty module name", func(c *Config) { c.TargetModules = TargetModules{Names: []string{""}} }, "target_modules"},
		{"empty modules_to_save entry", func(c *Config) { c.ModulesToSave = []string{" "} }, "modules_to_save"},
		{"gaussian init is fine", func(c *Config) { c.InitLoraWeights = InitGaussian }, ""},
		{"lora_only bias is fine", func(c *Config) { c.Bias = BiasLoRAOnly }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.edit(&cfg)
			err := cfg.Validate()
			if c.key == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != c.key || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("want a ConfigError on %s, got %v", c.key, err)
			}
			if !strings.HasPrefix(err.Error(), "lora: "+c.key+": ") {
				t.Errorf("message %q does not start with the key", err)
			}
		})
	}
}

// TestNormalize: fan_in_fan_out on a plain Linear is reset with PEFT's warning (PEFT's merge and unmerge, peft/tuners/lora/layer.py), and SEQ_CLS adds
// the heads to modules_to_save (peft/tuners/lora/config.py, the classifier saved with the adapter, modules_to_save in peft/utils/save_and_load.py).
func TestNormalize(t *testing.T) {
	c := DefaultConfig()
	c.FanInFanOut, c.TaskType, c.ModulesToSave = true, TaskSeqCls, []string{"classifier"}
	w := c.Normalize()
	if c.FanInFanOut || len(w) != 1 || w[0] != FanInFanOutWarning {
		t.Errorf("fan_in_fan_out %v, warnings %q", c.FanInFanOut, w)
	}
	if !slices.Equal(c.ModulesToSave, []string{"classifier", "score"}) {
		t.Errorf("modules_to_save %v, want [classifier score]", c.ModulesToSave)
	}
	if w := c.Normalize(); len(w) != 0 || len(c.ModulesToSave) != 2 {
		t.Errorf("a second Normalize changed something: %q %v", w, c.ModulesToSave)
	}
}

// TestAdapterConfigJSON checks the written file against the values PEFT 0.21 writes for LoraConfig(task_type
// SEQ_CLS, r 8, lora_alpha 16, lora_dropout 0.1, target_modules [query, value]) (peft/tuners/lora/config.py), and reads it back.
func TestAdapterConfigJSON(t *testing.T) {
	c := DefaultConfig()
	c.R, c.LoraAlpha, c.LoraDropout, c.TaskType = 8, 16, 0.1, TaskSeqCls
	c.TargetModules = TargetModules{Names: []string{"query", "value"}}
	c.Normalize()
	dir := t.TempDir()
	if err := WriteAdapterConfig(dir, c, "bert-base-uncased"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, AdapterConfigName))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"peft_type": "LORA", "task_type": "SEQ_CLS", "r": 8.0, "lora_alpha": 16.0, "lora_dropout": 0.1,
		"target_modules": []any{"query", "value"}, "bias": "none", "modules_to_save": []any{"classifier", "score"},
		"fan_in_fan_out": false, "use_rslora": false, "init_lora_weights": true,
		"base_model_name_or_path": "bert-base-uncased", "inference_mode": true, "lora_bias": false,
		"use_dora": false, "peft_version": "0.21.0", "layers_to_transform": nil, "layers_pattern": nil,
		"exclude_modules": nil, "rank_pattern": map[string]any{}, "alpha_pattern": map[string]any{},
		"loftq_config": map[string]any{},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("adapter_config.json\n%s\nwant the values of peft/tuners/lora/config.py %v", data, want)
	}
	if !strings.Contains(string(data), "\n  \"alpha_pattern\": {},\n  \"base_model_name_or_path\"") {
		t.Errorf("keys are not sorted with a two-space indent:\n%s", data)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %d entries, want only %s (no temporary file left)", len(ents), AdapterConfigName)
	}
	back, base, err := ReadAdapterConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if base != "bert-base-uncased" || !reflect.DeepEqual(back, c) {
		t.Errorf("read back %+v base %q, want %+v", back, base, c)
	}
}

// TestParseAdapterConfig reads PEFT-written variants and refuses LoRA variants tune does not implement.
func TestParseAdapterConfig(t *testing.T) {
	for _, c := range []struct {
		name, json string
		check      func(c Config) bool
		wantErr    string
	}{
		{"minimal PEFT file takes PEFT's defaults", `{"peft_type":"LORA"}`,
			func(c Config) bool {
				return c.R == 8 && c.LoraAlpha == 8 && c.Bias == "none" && !c.TargetModules.IsSet()
			}, ""},
		{"regex target and gaussian init", `{"peft_type":"LORA","r":4,"lora_alpha":8,"target_modules":".*\\.query","init_lora_weights":"gaussian","task_type":null}`,
			func(c Config) bool {
				return c.TargetModules.Regex == `.*\.query` && c.InitLoraWeights == InitGaussian && c.R == 4
			}, ""},
		{"unknown PEFT fields are ignored", `{"peft_type":"LORA","megatron_core":"megatron.core","auto_mapping":null}`, nil, ""},
		{"DoRA is refused", `{"peft_type":"LORA","use_dora":true}`, nil, "use_dora"},
		{"rank_pattern is refused", `{"peft_type":"LORA","rank_pattern":{"query":4}}`, nil, "rank_pattern"},
		{"layers_to_transform is refused", `{"peft_type":"LORA","layers_to_transform":[0]}`, nil, "layers_to_transform"},
		{"another PEFT method is refused", `{"peft_type":"IA3"}`, nil, "peft_type"},
		{"bad values are validated", `{"peft_type":"LORA","r":0}`, nil, "r: must be > 0"},
		{"broken JSON", `{"peft_type":`, nil, "adapter_config.json: invalid JSON: line 1 column 13"},
		// Said "invalid JSON: json: cannot unmarshal string into Go struct field adapterFile.Config.r of type int".
		{"a value of the wrong type", "{\"peft_type\":\"LORA\",\n\"r\":\"8\"}", nil, `adapter_config.json: line 2 column 7: "r": want an integer, got a string`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, _, err := ParseAdapterConfig([]byte(c.json))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("want error %q, got %v", c.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.check != nil && !c.check(cfg) {
				t.Errorf("parsed %+v", cfg)
			}
		})
	}
}

func TestInitLoraWeightsYAML(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"true", "true"}, {"false", "false"}, {"yes", "true"}, {"gaussian", "gaussian"}, {`"true"`, "true"},
	} {
		var cfg Config
		if err := yaml.Unmarshal([]byte("init_lora_weights: "+c.in), &cfg); err != nil || string(cfg.InitLoraWeights) != c.want {
			t.Errorf("init_lora_weights: %s → %q (%v), want %q", c.in, cfg.InitLoraWeights, err, c.want)
		}
	}
}
