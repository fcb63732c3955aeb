package llama

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

const v4Llama = `{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 37, "hidden_size": 16,
 "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 6,
 "rms_norm_eps": 1e-5, "rope_theta": 500.0, "rope_scaling": {"rope_type": "llama3", "factor": 4.0,
 "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8},
 "torch_dtype": "bfloat16", "tie_word_embeddings": false, "custom_key": 7}`

const v5Llama = `{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 37, "hidden_size": 16,
 "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 6,
 "rms_norm_eps": 1e-5, "rope_parameters": {"rope_theta": 500.0, "rope_type": "llama3", "factor": 4.0,
 "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8},
 "dtype": "bfloat16", "tie_word_embeddings": false}`

// TestConfigLayouts: the v4 (rope_theta, rope_scaling, torch_dtype) and v5 (rope_parameters, dtype) layouts of
// one model parse to the same Config, and saving keeps each layout and unknown keys.
func TestConfigLayouts(t *testing.T) {
	a, err := ParseConfig([]byte(v4Llama))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseConfig([]byte(v5Llama))
	if err != nil {
		t.Fatal(err)
	}
	a.raw, b.raw = nil, nil
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("v4 %+v\nv5 %+v", a, b)
	}
	want := tinyConfig(t, "llama")
	want.RMSNormEps, want.InitializerRange = 1e-5, 0.02
	if !reflect.DeepEqual(a, want) {
		t.Errorf("parsed %+v\nwant   %+v", a, want)
	}
	for _, c := range []struct{ in, has, lacks string }{
		{v4Llama, `"rope_scaling"`, `"rope_parameters"`}, {v5Llama, `"rope_parameters"`, `"rope_scaling"`},
	} {
		cfg, _ := ParseConfig([]byte(c.in))
		out, err := cfg.configJSON()
		if err != nil {
			t.Fatal(err)
		}
		s := string(out)
		if !strings.Contains(s, c.has) || strings.Contains(s, c.lacks) || !strings.Contains(s, `"float32"`) {
			t.Errorf("saved config lost its layout or dtype:\n%s", s)
		}
		back, err := ParseConfig(out)
		if err != nil {
			t.Fatal(err)
		}
		back.raw, cfg.raw = nil, nil
		if !reflect.DeepEqual(back, cfg) {
			t.Errorf("round trip: %+v, want %+v", back, cfg)
		}
	}
	if cfg, _ := ParseConfig([]byte(v4Llama)); !strings.Contains(string(must(cfg.configJSON())), `"custom_key": 7`) {
		t.Error("an unknown key was not saved back")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestConfigRefusals: what tune does not build is an error naming the key and what is supported.
func TestConfigRefusals(t *testing.T) {
	base := `"vocab_size": 37, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 1, "num_attention_heads": 4`
	for _, c := range []struct{ json, want string }{
		{`{"model_type": "gemma", ` + base + `}`, `model_type: llama: model_type "gemma" is not a Llama-family model; tune builds llama, mistral, qwen2, qwen3`},
		{`{"model_type": "llama", ` + base + `, "rope_scaling": {"rope_type": "yarn", "factor": 4}}`, `rope_scaling.rope_type: "yarn" is not supported; tune computes rope types "default" and "llama3"`},
		{`{"model_type": "llama", ` + base + `, "rope_scaling": {"type": "linear", "factor": 2}}`, `rope_scaling.rope_type: "linear" is not supported`},
		{`{"model_type": "qwen3", ` + base + `, "rope_parameters": {"rope_type": "dynamic", "rope_theta": 1e6}}`, `rope_parameters.rope_type: "dynamic"`},
		{`{"model_type": "llama", ` + base + `, "rope_scaling": {"rope_type": "llama3", "factor": 8}}`, `rope_scaling.low_freq_factor: missing`},
		{`{"model_type": "llama", ` + base + `, "hidden_act": "gelu"}`, `hidden_act: "gelu" is not supported`},
		{`{"model_type": "llama", ` + base + `, "partial_rotary_factor": 0.5}`, `partial_rotary_factor: 0.5 is not supported`},
		{`{"model_type": "llama", ` + base + `, "attention_dropout": 0.1}`, `attention_dropout: 0.1 is not supported`},
		{`{"model_type": "llama", ` + base + `, "num_key_value_heads": 3}`, `num_key_value_heads: 3 must divide num_attention_heads 4`},
		{`{"model_type": "llama", ` + base + `, "head_dim": 5}`, `head_dim: 5 must be even`},
		{`{"model_type": "llama", ` + base + `, "pretraining_tp": 2}`, `pretraining_tp: 2 is not supported`},
		{`{"model_type": "mistral", ` + base + `, "attention_bias": true}`, `attention_bias: true is not supported for mistral`},
		{`{"model_type": "llama", "architectures": ["Qwen2ForCausalLM"], ` + base + `}`, `architectures: "Qwen2ForCausalLM" does not match model_type "llama"`},
		{`{"model_type": "llama", "vocab_size": 0, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 1, "num_attention_heads": 4}`, `vocab_size: 0 must be positive`},
		// A wrong JSON type said "json: cannot unmarshal string into Go struct field hfConfig.hidden_size of type int".
		{"{\"model_type\": \"llama\",\n \"hidden_size\": \"abc\"}", `line 2 column 21: "hidden_size": want an integer, got a string`},
		{`{"model_type": "llama", ` + base + `, "rope_theta": [1]}`, `"rope_theta": want a number, got a list`},
		{`{"model_type": "llama", ` + base + `, "tie_word_embeddings": "yes"}`, `"tie_word_embeddings": want true or false, got a string`},
		{`{"model_type": "llama", ` + base + `, "hidden_size": 1.5}`, `"hidden_size": want an integer, got the number 1.5`},
		{"{\"model_type\": \"llama\",\n \"hidden_size\": 16", `invalid JSON: line 2 column 18: unexpected end of JSON input`},
	} {
		_, err := ParseConfig([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant an error containing %q", c.json, err, c.want)
		}
	}
	// The file name is in the message of ReadConfig.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "llama", `+base+`, "hidden_act": "relu"}`), 0o644)
	if _, err := ReadConfig(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "config.json")+": hidden_act") {
		t.Errorf("ReadConfig: %v", err)
	}
}

// TestSlidingWindow: Mistral's window (and Qwen's when use_sliding_window) refuses longer sequences at Forward
// with a message naming the key; a window of at least the sequence length equals full causal attention.
func TestSlidingWindow(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model_type": "mistral", "vocab_size": 37, "hidden_size": 16, "intermediate_size": 24,
		"num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "sliding_window": 4}`))
	if err != nil || cfg.SlidingWindow != 4 {
		t.Fatalf("%+v %v", cfg, err)
	}
	for _, c := range []struct {
		json string
		want int
	}{
		{`{"model_type": "qwen2", "sliding_window": 4, "use_sliding_window": false}`, 0},
		{`{"model_type": "qwen2", "sliding_window": 4, "use_sliding_window": true}`, 4},
		{`{"model_type": "mistral", "sliding_window": null}`, 0},
		{`{"model_type": "qwen3", "sliding_window": 4, "layer_types": ["full_attention", "sliding_attention"]}`, 4},
	} {
		js := strings.Replace(c.json, "{", `{"vocab_size": 37, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 1, "num_attention_heads": 4, `, 1)
		got, err := ParseConfig([]byte(js))
		if err != nil || got.SlidingWindow != c.want {
			t.Errorf("%s: window %d (%v), want %d", c.json, got.SlidingWindow, err, c.want)
		}
	}
	m := newModel(t, cpuBackend(), cfg, 1)
	if _, err := m.Forward(testBatch(1, 4, 37, []int{4}), transformer.ForwardOptions{}); err != nil {
		t.Errorf("T = window: %v", err)
	}
	_, err = m.Forward(testBatch(1, 5, 37, []int{5}), transformer.ForwardOptions{})
	if err == nil || !strings.Contains(err.Error(), "exceeds the config's sliding_window 4") {
		t.Errorf("T > window: %v", err)
	}
}

// TestLoadRefusesMismatchedWeights: a checkpoint with a missing, an unexpected or a mis-shaped tensor is an
// error naming it and the config.json, and a successful save/load round trip is exact (sharded too).
func TestLoadRefusesMismatchedWeights(t *testing.T) {
	b := cpuBackend()
	cfg := tinyConfig(t, "qwen3")
	m := newModel(t, b, cfg, 2)
	dir := t.TempDir()
	if err := m.SaveSharded(dir, 3000); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, loaders.SafetensorsIndexName)); err != nil {
		t.Fatalf("no shard index: %v", err)
	}
	back, _, err := LoadPretrained(dir, b, transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	batch := testBatch(2, 5, cfg.VocabSize, []int{5, 3})
	o1, _ := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
	o2, _ := back.Forward(batch, transformer.ForwardOptions{HostLogits: true})
	for i := range o1.Logits {
		if o1.Logits[i] != o2.Logits[i] {
			t.Fatalf("sharded round trip: logits differ at %d", i)
		}
	}
	// A single-file save over the sharded one removes the shards.
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, loaders.SafetensorsIndexName)); err == nil {
		t.Error("the old shard index survived a single-file save")
	}
	write := func(t *testing.T, edit func(map[string]loaders.HostTensor)) string {
		t.Helper()
		ck, err := loaders.OpenCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		ts := map[string]loaders.HostTensor{}
		for _, n := range ck.Names() {
			ht, _ := ck.Get(n)
			v, _ := ht.Float32()
			ts[n], _ = loaders.NewHostTensor(n, tensor.F32, ht.Shape, v)
		}
		edit(ts)
		out := t.TempDir()
		var list []loaders.HostTensor
		for _, ht := range ts {
			list = append(list, ht)
		}
		if err := loaders.WriteSafetensors(filepath.Join(out, loaders.SafetensorsWeightsName), list, nil); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(filepath.Join(dir, "config.json"))
		os.WriteFile(filepath.Join(out, "config.json"), data, 0o644)
		return out
	}
	for _, c := range []struct {
		name string
		edit func(map[string]loaders.HostTensor)
		want string
	}{
		{"missing", func(ts map[string]loaders.HostTensor) { delete(ts, "model.layers.0.self_attn.k_norm.weight") },
			"1 tensors missing from the checkpoint: model.layers.0.self_attn.k_norm.weight"},
		{"unexpected", func(ts map[string]loaders.HostTensor) {
			ts["model.layers.0.self_attn.q_proj.bias"], _ = loaders.NewHostTensor("model.layers.0.self_attn.q_proj.bias", tensor.F32, []int{24}, make([]float32, 24))
		}, "1 tensors the model does not have: model.layers.0.self_attn.q_proj.bias"},
		{"mis-shaped", func(ts map[string]loaders.HostTensor) {
			ts["model.norm.weight"], _ = loaders.NewHostTensor("model.norm.weight", tensor.F32, []int{15}, make([]float32, 15))
		}, "model.norm.weight"},
		{"inv_freq buffers are ignored", func(ts map[string]loaders.HostTensor) {
			ts["model.layers.0.self_attn.rotary_emb.inv_freq"], _ = loaders.NewHostTensor("model.layers.0.self_attn.rotary_emb.inv_freq", tensor.F32, []int{3}, make([]float32, 3))
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := write(t, c.edit)
			_, _, err := LoadPretrained(d, b, transformer.LoadOptions{})
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "config.json") {
				t.Errorf("got %v, want an error naming %q and config.json", err, c.want)
			}
		})
	}
	if _, _, err := LoadPretrained(dir, b, transformer.LoadOptions{NumLabels: 2}); err == nil {
		t.Error("a causal LM accepted num_labels")
	}
	if _, _, err := transformer.Open(dir, b, transformer.LoadOptions{}); err != nil {
		t.Errorf("transformer.Open of a qwen3 checkpoint: %v", err)
	}
}
