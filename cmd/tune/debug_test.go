package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/bert"
)

// plantedTinyBert copies tiny-bert-random (weights and tokenizer) into a temporary directory with a NaN
// planted at element 100 of name.
func plantedTinyBert(t *testing.T, name string) string {
	t.Helper()
	src := testutil.SharedData(t, "tiny-bert-random")
	b := cpu.New()
	m, _, err := bert.LoadPretrained(src, b, transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := m.Parameter(name)
	if !ok {
		t.Fatalf("no parameter %s", name)
	}
	host := make([]float32, p.Value.Numel())
	if err := b.Download(host, p.Value); err != nil {
		t.Fatal(err)
	}
	host[100] = float32(math.NaN())
	if err := b.Upload(p.Value, host); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny-bert-nan")
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var debugInput = filepath.Join("..", "..", "testdata", "debug", "amp_compare_input.tsv")

// TestDebugNaNFindsPlantedLayer: tune debug nan on tiny-bert-random with a NaN planted in layer 1's query
// weight names the weight and the module, and exits 1, in each precision; the clean model exits 0.
func TestDebugNaNFindsPlantedLayer(t *testing.T) {
	const weight = "bert.encoder.layer.1.attention.self.query.weight"
	dir := plantedTinyBert(t, weight)
	for _, flag := range []string{"", "--fp16", "--bf16"} {
		args := []string{"debug", "nan", "--device", "cpu", "--model", dir, "--input", debugInput}
		if flag != "" {
			args = append(args, flag)
		}
		code, stdout, stderr := runCLI(args...)
		if code != exitError {
			t.Fatalf("%v: exit %d, want 1\n%s%s", args, code, stdout, stderr)
		}
		for _, want := range []string{
			"weights: 1 of 41 tensors non-finite", weight + "  ",
			"first non-finite: the output of bert.encoder.layer.1.attention.self.query (batch 1",
			"its own weights are non-finite: " + weight,
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%s: stdout lacks %q:\n%s", flag, want, stdout)
			}
		}
		if !strings.Contains(stderr, "tune: non-finite values found: first in the output of bert.encoder.layer.1.attention.self.query") {
			t.Errorf("%s: stderr %q", flag, stderr)
		}
	}
	code, stdout, stderr := runCLI("debug", "nan", "--device", "cpu", "--model", testutil.SharedData(t, "tiny-bert-random"), "--input", debugInput, "--fp16")
	if code != exitOK || !strings.Contains(stdout, "no non-finite value") || !strings.Contains(stdout, "backward, batch 1") {
		t.Errorf("clean model: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestDebugNaNRecipe runs tune debug nan on the tiny recipe (its model, data and batch size) in fp16: clean.
func TestDebugNaNRecipe(t *testing.T) {
	testutil.IsolateCache(t)
	code, stdout, stderr := runCLI("debug", "nan", tinyRecipe, "training.fp16=true", "--batches", "1")
	if code != exitOK || !strings.Contains(stdout, "precision: fp16, backward seeded with loss scale 65536; 1 batch") ||
		!strings.Contains(stdout, "no non-finite value") {
		t.Errorf("exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestDebugNaNCausalRecipe: tune debug nan tiny-chat (a decoder recipe) is a usage error naming the recipe and
// what to use; before, it panicked with a nil pointer in datasets.(*Text).EpochOrder (the recipe has SFT rows,
// no classification set) and printed a goroutine dump.
func TestDebugNaNCausalRecipe(t *testing.T) {
	testutil.IsolateCache(t)
	code, stdout, stderr := runCLI("debug", "nan", "tiny-chat", "--batches", "1")
	if code != exitUsage || !strings.Contains(stderr, "trains a causal language model") || strings.Contains(stderr, "goroutine") {
		t.Errorf("exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestDebugCompareTable: tune debug compare on tiny-bert-random prints every layer, the logits and the op
// dtypes, and exits 0.
func TestDebugCompareTable(t *testing.T) {
	code, stdout, stderr := runCLI("debug", "compare", "--device", "cpu", "--model", testutil.SharedData(t, "tiny-bert-random"), "--input", debugInput)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"FP32 vs autocast over 32 examples in 4 batches", "bert.embeddings ", "bert.encoder.layer.0 ",
		"bert.encoder.layer.1 ", "bert.pooler ", "logits ", "ops under fp16 autocast: ", "Linear / attention products F16 (FP32 accumulate)",
		"LayerNorm F32", "every difference is below 0.01"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if code, _, stderr := runCLI("debug", "compare", "--model", "x"); code != exitUsage || !strings.Contains(stderr, "--input") {
		t.Errorf("without --input: exit %d, %q", code, stderr)
	}
}

// TestFinetuneStopsOnDivergence: a learning rate that blows the weights up ends tune finetune with exit 1 and
// the trainer's message on stderr.
func TestFinetuneStopsOnDivergence(t *testing.T) {
	testutil.IsolateCache(t)
	out := filepath.Join(t.TempDir(), "out")
	code, _, stderr := runCLI("finetune", tinyRecipe, "training.learning_rate=1e30", "training.output_dir="+out, "training.max_steps=5")
	if code != exitError || !strings.Contains(stderr, "the loss is NaN") || !strings.Contains(stderr, "lower learning_rate") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "model.safetensors")); err == nil {
		t.Error("a diverged run wrote model.safetensors")
	}
}

// TestEvalFailsOnNonFiniteLogits (tester4): tune eval on a model with a NaN weight printed eval_loss NaN and
// scores with exit 0, while tune predict on the same model stops at the first non-finite logits. eval now fails
// as predict does: the weights are checked, and a non-finite one is a corrupt model (exit 2, tester 12), named,
// with tune debug nan to list the rest (tune inspect reads only the headers); the clean model evaluates.
func TestEvalFailsOnNonFiniteLogits(t *testing.T) {
	dir := plantedTinyBert(t, "bert.encoder.layer.0.attention.self.query.weight")
	code, stdout, stderr := runCLI("eval", "--device", "cpu", "--model", dir, "--data", debugInput)
	if code != exitUsage || !strings.Contains(stderr, "the model's weights are non-finite (bert.encoder.layer.0.attention.self.query.weight[") ||
		!strings.Contains(stderr, "the checkpoint is corrupt") || !strings.Contains(stderr, "`tune debug nan --model "+dir+"` lists every non-finite tensor") ||
		strings.Contains(stderr, "tune inspect") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 naming the NaN weight", code, stdout, stderr)
	}
	code, _, stderr = runCLI("eval", "--device", "cpu", "--model", testutil.SharedData(t, "tiny-bert-random"), "--data", debugInput)
	if code != exitOK {
		t.Errorf("the clean model: exit %d, stderr %q", code, stderr)
	}
}
