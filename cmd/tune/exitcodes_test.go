package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestExitCodesFollowTheClasses: the same kind of mistake gets the same exit status whatever the command or
// the model's source (issue 20, item 8): a missing path, a tokenizer that does not fit the checkpoint, and a
// target_modules typo are bad usage (2), and the typo's message lists the model's module names.
func TestExitCodesFollowTheClasses(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model; skipped in -short mode")
	}
	testutil.IsolateCache(t)
	missing := filepath.Join(t.TempDir(), "nope")
	for _, args := range [][]string{{"inspect", missing}, {"tokenize", "--tokenizer", missing}} {
		code, _, stderr := runCLI(args...)
		if code != exitUsage || !strings.Contains(stderr, "no such file or directory") {
			t.Errorf("%s: exit %d %s", args, code, stderr)
		}
	}
	ckpt := tinyCheckpoint(t)
	tiny := filepath.Join("..", "..", "recipes", "data", "tiny")
	base := []string{"--device", "cpu", filepath.Join("..", "..", "recipes", "bert.yaml"), "model.path=" + ckpt,
		"data.train=" + filepath.Join(tiny, "train.tsv"), "data.eval=" + filepath.Join(tiny, "dev.tsv"), "data.max_length=32",
		"training.max_steps=1", "training.bf16=false"}
	// A vocabulary larger than the checkpoint's embedding: exit 2 from finetune as from validate.
	vocab, _ := os.ReadFile(filepath.Join(tiny, "vocab.txt"))
	big := filepath.Join(t.TempDir(), "vocab.txt")
	os.WriteFile(big, append(vocab, []byte(strings.Repeat("extra\n", 50))...), 0o644)
	for _, cmd := range []string{"validate", "finetune"} {
		code, _, stderr := runCLI(append(append([]string{cmd}, base...), "tokenizer.path="+big, "training.output_dir="+filepath.Join(t.TempDir(), "o"))...)
		if code != exitUsage || !strings.Contains(stderr, "has 306 tokens but the model in "+ckpt+" (model.path) has vocab_size 256") {
			t.Errorf("%s with a bigger vocabulary: exit %d %s", cmd, code, stderr)
		}
	}
	// The same mismatch given to eval and predict (--tokenizer, or an adapter's own tokenizer): exit 2 as well.
	dev := filepath.Join(tiny, "dev.tsv")
	for _, args := range [][]string{
		{"eval", "--device", "cpu", "--model", ckpt, "--tokenizer", big, "--data", dev},
		{"predict", "--device", "cpu", "--model", ckpt, "--tokenizer", big, "--input", dev},
	} {
		code, _, stderr := runCLI(args...)
		if code != exitUsage || !strings.Contains(stderr, "has 306 tokens but the model in "+ckpt+" has vocab_size 256") {
			t.Errorf("%s with a bigger vocabulary: exit %d %s", args[0], code, stderr)
		}
	}
	// A target_modules typo: exit 2, the names the model has and the closest, from validate as from finetune,
	// before the weights load (a checkpoint with its config.json and no weights gives the same message).
	weightless := filepath.Join(t.TempDir(), "weightless")
	os.Mkdir(weightless, 0o755)
	cfg, _ := os.ReadFile(filepath.Join(ckpt, "config.json"))
	os.WriteFile(filepath.Join(weightless, "config.json"), cfg, 0o644)
	for _, args := range [][]string{
		append([]string{"validate"}, base...),
		append([]string{"finetune"}, base...),
		append(append([]string{"finetune"}, base...), "model.path="+weightless, "tokenizer.path="+tiny),
	} {
		code, _, stderr := runCLI(append(args, "lora.target_modules=[qurey, vlaue]", "training.output_dir="+filepath.Join(t.TempDir(), "o"))...)
		if code != exitUsage || !strings.Contains(stderr, "lora.target_modules: for the model in ") ||
			!strings.Contains(stderr, "the model's Linear modules are named query, key, value, dense") ||
			!strings.Contains(stderr, `did you mean "qurey" → "query", "vlaue" → "value"?`) {
			t.Errorf("%s: a target_modules typo: exit %d %s", args[0], code, stderr)
		}
	}
}
