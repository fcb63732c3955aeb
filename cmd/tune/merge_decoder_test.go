package main

import (
	"path/filepath"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
)

// TestMergeDecoderAdapter: tune merge takes a decoder base by its config.json's model_type (here PEFT's c_attn
// adapter on the tiny GPT-2, fan_in_fan_out), and the merged checkpoint gives the adapted model's logits. Before,
// merge read every base as BERT and refused it ("model_type gpt2 is not BERT's").
func TestMergeDecoderAdapter(t *testing.T) {
	model := filepath.Join("..", "..", "testdata", "gpt2", "tiny")
	adapter := filepath.Join("..", "..", "testdata", "gpt2", "peft_adapter")
	out := filepath.Join(t.TempDir(), "merged")
	if code, _, stderr := runTune(t, "merge", "--model", model, "--adapter", adapter, "--output", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	batch := &loaders.Batch{B: 2, T: 7, InputIDs: []int32{1, 5, 9, 3, 7, 2, 4, 8, 6, 0, 11, 13, 2, 5},
		AttentionMask: []int32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}}
	logits := func(m transformer.Model) []float32 {
		res, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.Logits
	}
	base, _, err := transformer.Open(model, cpu.New(), transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plain := logits(base) // before the adapter wraps base's projections
	adapted, err := lora.LoadAdapter(base, adapter)
	if err != nil {
		t.Fatal(err)
	}
	merged, _, err := transformer.Open(out, cpu.New(), transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, got := logits(adapted), logits(merged)
	if e, i := tensortest.RelErr(got, want); e > 1e-5 {
		t.Errorf("merged logits: relative error %.3g at %d", e, i)
	}
	if e, _ := tensortest.RelErr(plain, want); e < 1e-4 {
		t.Errorf("the adapter changes the logits by only %.3g: the check cannot tell merged from base", e)
	}
}

// TestMergeTuneLlamaLoRARun: the adapter directory of a tune LoRA run on a Llama (tune finetune tiny-chat
// lora.r=4) also holds the run's config.json, which merge read as a BERT config for classification labels, so
// it failed with "llama: load ...: a causal language model has no classification labels (num_labels, labels,
// problem_type)". Labels are read only for a BERT base; the merged checkpoint gives the adapted logits.
func TestMergeTuneLlamaLoRARun(t *testing.T) {
	model := filepath.Join("..", "..", "recipes", "data", "tiny-chat")
	run := filepath.Join(t.TempDir(), "run")
	if code, _, stderr := runTune(t, "finetune", "tiny-chat", "lora.r=4", "lora.target_modules=all-linear", "training.max_steps=3",
		"training.learning_rate=0.05", "training.eval_strategy=no", "training.output_dir="+run); code != 0 {
		t.Fatalf("finetune: exit %d: %s", code, stderr)
	}
	out := filepath.Join(t.TempDir(), "merged")
	if code, _, stderr := runTune(t, "merge", "--model", model, "--adapter", run, "--output", out); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, stderr)
	}
	batch := &loaders.Batch{B: 1, T: 5, InputIDs: []int32{1, 5, 9, 3, 7}, AttentionMask: []int32{1, 1, 1, 1, 1}}
	logits := func(m transformer.Model) []float32 {
		res, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.Logits
	}
	base, _, err := transformer.Open(model, cpu.New(), transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	adapted, err := lora.LoadAdapter(base, run)
	if err != nil {
		t.Fatal(err)
	}
	merged, _, err := transformer.Open(out, cpu.New(), transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e, i := tensortest.RelErr(logits(merged), logits(adapted)); e > 1e-5 {
		t.Errorf("merged logits: relative error %.3g at %d", e, i)
	}
}
