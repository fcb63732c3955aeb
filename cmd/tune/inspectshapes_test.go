package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// writeDecoderFixture writes into a new temporary directory a one-layer causal LM of modelType (llama or qwen3)
// from scratch: config.json with cfg's sizes edited by edit, and model.safetensors with the tensors of the
// unedited sizes (hidden 8, 2 query heads and 1 key/value head of 4, intermediate 16, vocab 32, tied), with
// shape[name] in place of a tensor's shape where given.
func writeDecoderFixture(t *testing.T, modelType string, edit map[string]any, shape map[string][]int) string {
	t.Helper()
	dir := t.TempDir()
	arch := map[string]string{"llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM"}[modelType]
	cfg := map[string]any{
		"architectures": []string{arch}, "model_type": modelType, "hidden_size": 8, "intermediate_size": 16,
		"num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
		"vocab_size": 32, "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
		"hidden_act": "silu", "tie_word_embeddings": true, "attention_bias": false,
	}
	for k, v := range edit {
		cfg[k] = v
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, loaders.ConfigName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	shapes := map[string][]int{
		"model.embed_tokens.weight":                      {32, 8},
		"model.norm.weight":                              {8},
		"model.layers.0.input_layernorm.weight":          {8},
		"model.layers.0.post_attention_layernorm.weight": {8},
		"model.layers.0.self_attn.q_proj.weight":         {8, 8},
		"model.layers.0.self_attn.k_proj.weight":         {4, 8},
		"model.layers.0.self_attn.v_proj.weight":         {4, 8},
		"model.layers.0.self_attn.o_proj.weight":         {8, 8},
		"model.layers.0.mlp.gate_proj.weight":            {16, 8},
		"model.layers.0.mlp.up_proj.weight":              {16, 8},
		"model.layers.0.mlp.down_proj.weight":            {8, 16},
	}
	if modelType == "qwen3" {
		shapes["model.layers.0.self_attn.q_norm.weight"] = []int{4}
		shapes["model.layers.0.self_attn.k_norm.weight"] = []int{4}
	}
	var list []loaders.HostTensor
	for name, s := range shapes {
		if o, ok := shape[name]; ok {
			s = o
		}
		n := 1
		for _, d := range s {
			n *= d
		}
		ht, err := loaders.NewHostTensor(name, tensor.F32, s, make([]float32, n))
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, ht)
	}
	if err := loaders.WriteSafetensors(filepath.Join(dir, loaders.SafetensorsWeightsName), list, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestInspectDecoderShapesExit2 (tester10 F1): tune inspect on a Llama or Qwen3 directory whose config.json
// implies other tensor shapes than the safetensors file holds exits 2 (bad input), naming the file, each
// tensor and its shape in the file and the one config.json implies, whether the difference is small (one
// tensor written with the wrong shape) or large (a vocab_size of 100000 over an embedding of 32 rows exited 1
// with a parameter count naming no tensor). The same directory without the edit is read without error.
func TestInspectDecoderShapesExit2(t *testing.T) {
	for _, mt := range []string{"llama", "qwen3"} {
		t.Run(mt, func(t *testing.T) {
			if code, _, errOut := runTune(t, "inspect", writeDecoderFixture(t, mt, nil, nil)); code != exitOK {
				t.Fatalf("the fixture itself: exit %d\n%s", code, errOut)
			}
			for _, c := range []struct {
				name  string
				edit  map[string]any
				shape map[string][]int
				want  string
			}{
				{"one tensor of another shape", nil, map[string][]int{"model.layers.0.self_attn.k_proj.weight": {8, 8}},
					"model.layers.0.self_attn.k_proj.weight: checkpoint [8 8], model [4 8]"},
				{"a vocab_size far beyond the weights", map[string]any{"vocab_size": 100_000}, nil,
					"model.embed_tokens.weight: checkpoint [32 8], model [100000 8]"},
				{"an intermediate_size far beyond the weights", map[string]any{"intermediate_size": 4096}, nil,
					"model.layers.0.mlp.down_proj.weight: checkpoint [8 16], model [8 4096]"},
			} {
				t.Run(c.name, func(t *testing.T) {
					dir := writeDecoderFixture(t, mt, c.edit, c.shape)
					code, out, errOut := runTune(t, "inspect", dir)
					if code != exitUsage {
						t.Errorf("exit %d, want %d", code, exitUsage)
					}
					if !strings.Contains(out, "total: ") {
						t.Errorf("the tensors were not shown:\n%s", out)
					}
					for _, w := range []string{filepath.Join(dir, loaders.SafetensorsWeightsName), c.want, "does not describe these weights"} {
						if !strings.Contains(errOut, w) {
							t.Errorf("stderr lacks %q:\n%s", w, errOut)
						}
					}
				})
			}
		})
	}
}
