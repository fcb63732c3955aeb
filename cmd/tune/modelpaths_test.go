package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer/bert"
)

// tinyModelDir saves an untrained 1-layer BERT with the tiny tokenizer's 256-token vocabulary into a new
// directory, without tokenizer files, and returns it with a LoRA adapter directory saved on top of it.
func tinyModelDir(t *testing.T) (model, adapter string) {
	t.Helper()
	dir := t.TempDir()
	model, adapter = filepath.Join(dir, "model"), filepath.Join(dir, "adapter")
	cfg := bert.DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 256, 16, 1, 2, 32
	cfg.MaxPositionEmbeddings = 64
	m, err := bert.NewBertForSequenceClassification(cpu.New(), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(model); err != nil {
		t.Fatal(err)
	}
	lc := lora.DefaultConfig()
	lc.R, lc.TaskType, lc.TargetModules = 2, lora.TaskSeqCls, lora.TargetModules{Names: []string{"query"}}
	lm, err := lora.Apply(m, lc, 1)
	if err != nil {
		t.Fatal(err)
	}
	lm.BaseModelNameOrPath = model
	if err := lm.Save(adapter); err != nil {
		t.Fatal(err)
	}
	return model, adapter
}

// TestEvalPredictModelPaths checks how eval and predict report their model, adapter, tokenizer and data paths:
// a path that does not exist, or does not hold what the flag needs (a tokenizer directory without a tokenizer,
// a model directory without weights or with a config.json the model cannot be built from), is a usage error
// naming the flag (exit 2), checked before the tokenizer inside the model directory and before anything
// loads; a model directory without a tokenizer says to pass --tokenizer (exit 2), which works.
func TestEvalPredictModelPaths(t *testing.T) {
	model, adapter := tinyModelDir(t)
	tiny := filepath.Join("..", "..", "recipes", "data", "tiny")
	dev := filepath.Join(tiny, "dev.tsv")
	empty := t.TempDir()
	big := t.TempDir()
	vocab := strings.Repeat("w\n", 300)
	if err := os.WriteFile(filepath.Join(big, "vocab.txt"), []byte("[PAD]\n[UNK]\n[CLS]\n[SEP]\n"+vocab), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(empty, "nonexist")
	noWeights, badConfig := filepath.Join(t.TempDir(), "noweights"), filepath.Join(t.TempDir(), "badconfig")
	for _, d := range []string{noWeights, badConfig} {
		copyDir(t, model, d)
	}
	if err := os.Remove(filepath.Join(noWeights, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(model, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), `"num_attention_heads": 2`, `"num_attention_heads": 3`, 1))
	if err := os.WriteFile(filepath.Join(badConfig, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want []string // fragments of stderr
		not  string   // a fragment stderr must not hold
	}{
		{"eval: a missing model directory", []string{"eval", "--model", missing, "--data", dev}, exitUsage,
			[]string{"--model " + missing + ": no such file or directory"}, "tokenizer"},
		{"predict: a missing model directory", []string{"predict", "--model", missing, "--input", dev}, exitUsage,
			[]string{"--model " + missing + ": no such file or directory"}, "tokenizer"},
		{"eval: a directory that is not a model", []string{"eval", "--model", empty, "--data", dev}, exitUsage,
			[]string{"has no config.json"}, ""},
		{"eval: an adapter directory given as the model", []string{"eval", "--model", adapter, "--data", dev}, exitUsage,
			[]string{"is a LoRA adapter directory", "--adapter", "base_model_name_or_path is " + model}, ""},
		{"eval: a missing adapter", []string{"eval", "--model", model, "--adapter", missing, "--data", dev}, exitUsage,
			[]string{"--adapter " + missing + ": no such file"}, ""},
		{"predict: a model directory given as the adapter", []string{"predict", "--model", model, "--adapter", model, "--input", dev}, exitUsage,
			[]string{"has no adapter_config.json"}, ""},
		{"eval: a missing data file", []string{"eval", "--model", model, "--tokenizer", tiny, "--data", missing}, exitUsage,
			[]string{"--data " + missing + ": no such file"}, ""},
		{"predict: a missing input file", []string{"predict", "--model", model, "--tokenizer", tiny, "--input", missing}, exitUsage,
			[]string{"--input " + missing + ": no such file"}, ""},
		{"eval: a missing tokenizer", []string{"eval", "--model", model, "--tokenizer", missing, "--data", dev}, exitUsage,
			[]string{"--tokenizer " + missing + ": no such file"}, ""},
		{"eval: a tokenizer directory without a tokenizer", []string{"eval", "--model", model, "--tokenizer", empty, "--data", dev}, exitUsage,
			[]string{"--tokenizer " + empty + ": " + empty + " holds neither tokenizer.json nor vocab.txt"}, ""},
		{"predict: a tokenizer directory without a tokenizer", []string{"predict", "--model", model, "--tokenizer", empty, "--input", dev}, exitUsage,
			[]string{"--tokenizer " + empty + ": " + empty + " holds neither tokenizer.json nor vocab.txt"}, ""},
		{"eval: no tokenizer in the model directory", []string{"eval", "--model", model, "--data", dev}, exitUsage,
			[]string{"--model " + model + " holds no tokenizer (neither tokenizer.json nor vocab.txt): pass --tokenizer"}, ""},
		{"predict: no tokenizer in the adapter or model directory", []string{"predict", "--model", model, "--adapter", adapter, "--input", dev}, exitUsage,
			[]string{"neither --adapter " + adapter + " nor --model " + model + " holds no tokenizer"}, ""},
		{"eval: a model directory without weights", []string{"eval", "--model", noWeights, "--tokenizer", tiny, "--data", dev}, exitUsage,
			[]string{"--model " + noWeights + " has no model.safetensors"}, ""},
		{"predict: a config.json the model cannot be built from", []string{"predict", "--model", badConfig, "--tokenizer", tiny, "--input", dev}, exitUsage,
			[]string{"--model " + badConfig + ": ", "config.json", "num_attention_heads"}, ""},
		{"eval: --tokenizer supplies it", []string{"eval", "--device", "cpu", "--model", model, "--tokenizer", tiny, "--data", dev}, exitOK,
			nil, "error"},
		{"predict: --tokenizer supplies it", []string{"predict", "--device", "cpu", "--model", model, "--tokenizer", tiny, "--input", dev}, exitOK,
			nil, "error"},
		{"eval --fp16 runs under FP16 autocast, as documented, without a warning", []string{"eval", "--fp16", "--device", "cpu", "--model", model, "--tokenizer", tiny, "--data", dev}, exitOK,
			nil, "warning"},
		{"predict --bf16 likewise", []string{"predict", "--bf16", "--device", "cpu", "--model", model, "--adapter", adapter, "--tokenizer", tiny, "--input", dev}, exitOK,
			nil, "warning"},
		// A tokenizer that does not fit the model is bad usage, as in tune finetune and tune validate.
		{"eval: a tokenizer larger than the model's vocabulary", []string{"eval", "--device", "cpu", "--model", model, "--tokenizer", big, "--data", dev}, exitUsage,
			[]string{"304 tokens", "vocab_size 256", "do not belong together"}, "Embedding"},
		{"predict: an adapter's tokenizer larger than the model's vocabulary", []string{"predict", "--device", "cpu", "--model", model, "--adapter", adapter, "--tokenizer", big, "--input", dev}, exitUsage,
			[]string{"304 tokens", "vocab_size 256", "the base model the adapter was trained on"}, "Embedding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tt.not != "" && strings.Contains(stderr, tt.not) {
				t.Errorf("stderr holds %q:\n%s", tt.not, stderr)
			}
		})
	}
}

// TestEvalWarnsAboutUnusedTensors evaluates a 2-layer checkpoint whose config.json says num_hidden_layers 1:
// the second layer's tensors are unused, which eval and predict report in one compact warning (transformers
// warns likewise) instead of passing silently.
func TestEvalWarnsAboutUnusedTensors(t *testing.T) {
	model, _ := tinyModelDir(t)
	two := filepath.Join(t.TempDir(), "two")
	cfg := bert.DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 256, 16, 2, 2, 32
	cfg.MaxPositionEmbeddings = 64
	m, err := bert.NewBertForSequenceClassification(cpu.New(), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(two); err != nil {
		t.Fatal(err)
	}
	oneLayer, err := os.ReadFile(filepath.Join(model, "config.json")) // the same config with 1 layer
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(two, "config.json"), oneLayer, 0o644); err != nil {
		t.Fatal(err)
	}
	tiny := filepath.Join("..", "..", "recipes", "data", "tiny")
	dev := filepath.Join(tiny, "dev.tsv")
	for _, args := range [][]string{
		{"eval", "--device", "cpu", "--model", two, "--tokenizer", tiny, "--data", dev},
		{"predict", "--device", "cpu", "--model", two, "--tokenizer", tiny, "--input", dev},
	} {
		t.Run(args[0], func(t *testing.T) {
			code, _, stderr := runCLI(args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			want := "tune: warning: 16 tensors of the checkpoint in " + two + " were not used by BertForSequenceClassification: bert.encoder.layer.1.* (16 tensors)"
			if !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr %q; want one line with %q", stderr, want)
			}
		})
	}
}

// copyDir copies the files of directory src (not its subdirectories) into a new directory dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckpointUsesTheRunsTokenizer checks that eval and predict given a checkpoint-N folder of a training run
// (which holds no tokenizer) as --model or --adapter use the tokenizer tune finetune left in the run's
// output_dir above it and say so on stderr; a checkpoint whose run has no tokenizer, or a folder that only
// looks like a checkpoint, still asks for --tokenizer (exit 2).
func TestCheckpointUsesTheRunsTokenizer(t *testing.T) {
	model, adapter := tinyModelDir(t)
	tiny := filepath.Join("..", "..", "recipes", "data", "tiny")
	dev := filepath.Join(tiny, "dev.tsv")
	root := t.TempDir()
	run, bare := filepath.Join(root, "run"), filepath.Join(root, "bare") // bare: a run without a tokenizer
	ckpt, loraCkpt := filepath.Join(run, "checkpoint-10"), filepath.Join(run, "checkpoint-20")
	lookalike := filepath.Join(run, "checkpoint-best")
	copyDir(t, model, ckpt)
	copyDir(t, model, lookalike)
	copyDir(t, adapter, loraCkpt)
	copyDir(t, model, filepath.Join(bare, "checkpoint-10"))
	copyDir(t, tiny, run) // vocab.txt and the data files, as a tokenizer directory
	note := "tune: using the tokenizer in " + run + ": "
	tests := []struct {
		name string
		args []string
		code int
		want string // a fragment of stderr
	}{
		{"predict --model a checkpoint", []string{"predict", "--device", "cpu", "--model", ckpt, "--input", dev}, exitOK,
			note + "--model " + ckpt + " is a checkpoint of that training run"},
		{"eval --model a checkpoint, with a trailing slash", []string{"eval", "--device", "cpu", "--model", ckpt + "/", "--data", dev}, exitOK,
			"tune: using the tokenizer in " + filepath.Join(ckpt+"/", "..")},
		{"eval --adapter a LoRA checkpoint", []string{"eval", "--device", "cpu", "--model", model, "--adapter", loraCkpt, "--data", dev}, exitOK,
			note + "--adapter " + loraCkpt + " is a checkpoint"},
		{"a checkpoint of a run without a tokenizer", []string{"predict", "--model", filepath.Join(bare, "checkpoint-10"), "--input", dev}, exitUsage,
			"holds no tokenizer"},
		{"a folder named like a checkpoint without a step", []string{"predict", "--model", lookalike, "--input", dev}, exitUsage,
			"holds no tokenizer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d with %q", code, stderr, tt.code, tt.want)
			}
		})
	}
}

// TestDataFileWithoutAFormat: `tune predict --input texts.txt` loaded the model and then failed with exit 1,
// "dataset texts.txt: cannot tell the format from the extension; set format to tsv, csv or jsonl" (predict's
// flag is --format); eval the same. Both are now usage errors before the model loads, saying what to do.
func TestDataFileWithoutAFormat(t *testing.T) {
	model, _ := tinyModelDir(t)
	tok := filepath.Join("..", "..", "recipes", "data", "tiny")
	txt := filepath.Join(t.TempDir(), "texts.txt")
	if err := os.WriteFile(txt, []byte("a good film\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"predict", "--model", model, "--tokenizer", tok, "--input", txt}, "--format tsv, csv or jsonl"},
		{[]string{"eval", "--model", model, "--tokenizer", tok, "--data", txt}, "name a .tsv, .csv or .jsonl file"},
	} {
		code, _, stderr := runCLI(c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, `extension ".txt"`) {
			t.Errorf("%s: exit %d, %s; want exit %d saying %q", c.args[0], code, stderr, exitUsage, c.want)
		}
	}
	if code, _, stderr := runCLI("predict", "--model", model, "--tokenizer", tok, "--input", txt, "--format", "tsv"); code == exitUsage && strings.Contains(stderr, "extension") {
		t.Errorf("--format tsv given: %s", stderr)
	}
}

// TestMistypedFolderSuggestsTheNearOne (tester13): eval --model runs/tyni, a typo of the folder runs/tiny, was
// looked up as a Hub id and answered with "tune download runs/tyni". The message now also names the folder
// that is there.
func TestMistypedFolderSuggestsTheNearOne(t *testing.T) {
	testutil.IsolateCache(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "runs", "tiny"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	code, _, stderr := runCLI("eval", "--model", "runs/tyni", "--data", "x.tsv")
	if want := "--model runs/tyni: no such file or directory here (did you mean " + filepath.Join("runs", "tiny") + "?)"; code != exitUsage || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want exit %d with %q", code, stderr, exitUsage, want)
	}
}
