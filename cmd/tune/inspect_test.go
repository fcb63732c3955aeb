package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestInspect runs `tune inspect` on the shared checkpoints and the repository's fixtures and checks the lines
// a user relies on.
func TestInspect(t *testing.T) {
	tests := []struct {
		name string
		path func(t *testing.T) string
		want []string
	}{
		{"shared tiny-bert-random directory", func(t *testing.T) string { return testutil.SharedData(t, "tiny-bert-random") },
			[]string{
				"tiny-bert-random/model.safetensors", `metadata:   format="pt"`,
				"bert.embeddings.word_embeddings.weight                  F32    [30522, 64]  7,813,632",
				"classifier.weight", "[2, 64]",
				"total: 41 tensors, 2,057,666 parameters, 8,230,664 bytes (7.8 MiB)",
				"model_type:    bert (BertForSequenceClassification)",
				"hidden:        64 (4 heads of 16), intermediate 128, gelu", "layers:        2", "heads:         4",
				"vocab:         30522, 512 positions, 2 token types", "labels:        2: LABEL_0, LABEL_1",
				"41 tensors matched (0 renamed), 0 missing, 0 mis-shaped, 0 unexpected",
			}},
		{"shared bert-base-uncased: config, no weights", func(t *testing.T) string { return testutil.SharedData(t, "bert-base-uncased") },
			[]string{"no weights:", "neither model.safetensors nor model.safetensors.index.json",
				"model_type:    bert (-)", "hidden:        768 (12 heads of 64), intermediate 3072", "layers:        12", "vocab:         30522"}},
		{"a single .safetensors file with its config beside it", func(t *testing.T) string {
			return testutil.Testdata(t, "safetensors", "bert-tiny", "model.safetensors")
		}, []string{"total: 41 tensors", "labels:        3: NEG, NEU, POS"}},
		{"a sharded index", func(t *testing.T) string {
			return testutil.Testdata(t, "safetensors", "bert-tiny-sharded", "model.safetensors.index.json")
		}, []string{"shards:     2 files", "total: 41 tensors", "41 tensors matched"}},
		{"legacy hub names: renames, ignored heads, missing classifier", func(t *testing.T) string {
			return testutil.Testdata(t, "safetensors", "bert-legacy")
		}, []string{"bert.embeddings.position_ids", "I64", "dtypes: F32 48, I64 1",
			"missing: classifier.weight, classifier.bias", "1 buffer (e.g. bert.embeddings.position_ids)",
			"renamed: 10, e.g. bert.embeddings.LayerNorm.beta -> bert.embeddings.LayerNorm.bias"}},
		{"tied MLM decoder", func(t *testing.T) string { return testutil.Testdata(t, "safetensors", "bert-mlm-tied") },
			[]string{"against BertForMaskedLM", "0 missing", "tied: cls.predictions.decoder.weight shares bert.embeddings.word_embeddings.weight"}},
		{"a llama causal LM: its config summarised, no BERT rules", func(t *testing.T) string {
			return filepath.Join(testutil.RepoRoot(t), "recipes", "data", "tiny-chat")
		}, []string{"total: 21 tensors", "model_type:  llama (LlamaForCausalLM, a causal LM)",
			"hidden:      64 (4 query heads of 16, 2 key/value heads), intermediate 128, silu", "layers:      2",
			"positions:   256 (max_position_embeddings), rope default, rope_theta 10000",
			"names checked against LlamaForCausalLM from config.json: 21 tensors matched (0 renamed), 0 missing, 0 mis-shaped, 0 unexpected"}},
		{"a qwen2 causal LM", func(t *testing.T) string { return testutil.Testdata(t, "decoder", "ckpt", "qwen2_v4_f32") },
			[]string{"model_type:  qwen2 (Qwen2ForCausalLM, a causal LM)", "vocab:       64, lm_head tied to embed_tokens"}},
		{"a gpt2 causal LM", func(t *testing.T) string { return testutil.Testdata(t, "gpt2", "tiny") },
			[]string{"model_type:  gpt2 (GPT2LMHeadModel, a causal LM)", "hidden:      32 (4 heads of 8), inner 128, gelu_new",
				"positions:   32 (n_positions, a learned table)", "names checked against GPT2LMHeadModel from config.json: 28 tensors matched"}},
		{"a config.json path shows its directory", func(t *testing.T) string {
			return testutil.Testdata(t, "safetensors", "bert-tiny", "config.json")
		}, []string{"total: 41 tensors", "labels:        3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runTune(t, "inspect", tt.path(t))
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestInspectErrors checks the exit codes and messages of bad calls.
func TestInspectErrors(t *testing.T) {
	corrupt := filepath.Join(t.TempDir(), "bad.safetensors")
	if err := os.WriteFile(corrupt, make([]byte, 5), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	badConfig := t.TempDir()
	tiny, err := os.ReadFile(testutil.Testdata(t, "safetensors", "bert-tiny", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(badConfig, "model.safetensors"), tiny, 0o644)
	os.WriteFile(filepath.Join(badConfig, "config.json"), []byte(`{"hidden_size": 100}`), 0o644)
	roberta := t.TempDir()
	os.WriteFile(filepath.Join(roberta, "model.safetensors"), tiny, 0o644)
	os.WriteFile(filepath.Join(roberta, "config.json"), []byte(`{"model_type": "roberta", "hidden_size": 64}`), 0o644)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no path", []string{"inspect"}, exitUsage, "inspect takes one PATH"},
		{"two paths", []string{"inspect", "a", "b"}, exitUsage, "got 2 arguments"},
		{"missing path", []string{"inspect", filepath.Join(empty, "nope")}, exitUsage, "no such file"},
		{"corrupt file", []string{"inspect", corrupt}, exitUsage, "bad.safetensors: header too small"},
		{"directory without weights or config", []string{"inspect", empty}, exitUsage, "no safetensors weights"},
		{"model_type roberta over BERT weights: tensors shown, then the error", []string{"inspect", roberta}, exitUsage,
			`model_type "roberta" is not supported; tune builds model_type bert, gpt2, llama, mistral, qwen2, qwen3`},
		{"invalid config beside good weights: tensors shown, then the error", []string{"inspect", badConfig}, exitUsage,
			"config.json: num_attention_heads: hidden_size 100 is not a multiple of num_attention_heads 12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runTune(t, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tt.code, tt.want)
			}
			if strings.Contains(tt.name, "tensors shown") && !strings.Contains(out, "total: 41 tensors") {
				t.Errorf("the tensors were not shown before the config error:\n%s", out)
			}
		})
	}
}

// TestInspectConfigDisagreesWithWeights: a config.json that does not describe the weights beside it is reported
// as the loaders refuse it, after the tensors, and inspect exits 2 as eval, finetune and generate do. Found from
// the headers: a config claiming 10000000 layers over two is named by its layer count before any tensor list
// is made (inspect printed "parameters: 369,920,096,832" and exited 0; a BERT config of 190000 layers listed
// three million missing names in 1.4 GB).
func TestInspectConfigDisagreesWithWeights(t *testing.T) {
	edited := func(src string, key string, value any) string {
		t.Helper()
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		data, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			t.Fatal(err)
		}
		cfg[key] = value
		data, _ = json.Marshal(cfg)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	tinyChat := filepath.Join(testutil.RepoRoot(t), "recipes", "data", "tiny-chat")
	for _, c := range []struct {
		name, dir string
		want      []string
	}{
		{"llama: 10000000 layers over two", edited(tinyChat, "num_hidden_layers", 10_000_000),
			[]string{"config.json has num_hidden_layers 10000000 but the checkpoint", "holds 2 layers (model.layers.0 to model.layers.1)"}},
		{"llama: another intermediate_size", edited(tinyChat, "intermediate_size", 120),
			[]string{"6 tensors of another shape: model.layers.0.mlp.down_proj.weight: checkpoint [64 128], model [64 120]", "does not describe these weights"}},
		{"gpt2: 10000000 layers over two", edited(testutil.Testdata(t, "gpt2", "tiny"), "n_layer", 10_000_000),
			[]string{"config.json has n_layer 10000000 but the checkpoint", "holds 2 layers (transformer.h.0 to transformer.h.1)"}},
		{"bert: 190000 layers over two", edited(testutil.Testdata(t, "safetensors", "bert-tiny"), "num_hidden_layers", 190_000),
			[]string{"config.json has num_hidden_layers 190000 but the checkpoint", "holds 2 layers (bert.encoder.layer.0 to bert.encoder.layer.1)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runTune(t, "inspect", c.dir)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if !strings.Contains(out, "total: ") {
				t.Errorf("the tensors were not shown:\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}

// TestInspectHelp checks that the help has a description and examples.
func TestInspectHelp(t *testing.T) {
	code, out, _ := runTune(t, "inspect", "--help")
	if code != exitOK || !strings.Contains(out, "Examples:") || !strings.Contains(out, "tune inspect ../bert-base-uncased") ||
		!strings.Contains(out, "model.safetensors.index.json") {
		t.Errorf("exit %d, help:\n%s", code, out)
	}
}

// TestInspectAdapter runs `tune inspect` on LoRA adapter directories (what a LoRA run writes into output_dir and
// its checkpoint-N/): the adapter's tensors, the adapter_config.json summary and the base config saved beside it.
func TestInspectAdapter(t *testing.T) {
	_, adapter, _, _ := mergeFixture(t)
	peft := t.TempDir() // as PEFT writes it: no config.json
	for _, f := range []string{"adapter_config.json", "adapter_model.safetensors"} {
		data, err := os.ReadFile(filepath.Join(adapter, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(peft, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	summary := []string{
		"adapter_model.safetensors", "base_model.model.bert.encoder.layer.1.intermediate.dense.lora_B.weight    F32    [48, 4]",
		"base_model.model.classifier.weight", "total: 14 tensors",
		"(LoRA, SEQ_CLS)", "r:                4, lora_alpha 8, scaling 2, lora_dropout 0",
		"target_modules:   [query, value, intermediate.dense]", "adapted:          6 modules (dense 2, query 2, value 2)",
		"modules_to_save:  classifier", "bias:             none",
	}
	tests := []struct {
		name string
		path string
		want []string
		not  string
	}{
		{"a tune adapter directory, with its base config", adapter,
			append(slices.Clone(summary), "base config saved with the adapter", "labels:        3: LABEL_0, LABEL_1, LABEL_2"), ""},
		{"the adapter's weights file", filepath.Join(adapter, "adapter_model.safetensors"), summary, ""},
		{"a PEFT adapter directory without config.json", peft, summary, "base config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runTune(t, "inspect", tt.path)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if tt.not != "" && strings.Contains(out, tt.not) {
				t.Errorf("output holds %q:\n%s", tt.not, out)
			}
		})
	}
}
