package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestModelKindMismatch checks that a causal LM given to eval, predict or debug, and a BERT classifier given to
// generate, are named as what they are (exit status 2) instead of failing on a detail of the wrong
// architecture: eval on a Llama used to say 'hidden_act "silu" is not supported: tune's BERT implements
// "gelu"', and generate on a BERT blamed a --tokenizer that was never given.
func TestModelKindMismatch(t *testing.T) {
	llama := filepath.Join("..", "..", "testdata", "sft", "tiny-llama")
	dev := filepath.Join("..", "..", "recipes", "data", "tiny", "dev.tsv")
	for _, args := range [][]string{
		{"eval", "--model", llama, "--data", dev},
		{"predict", "--model", llama, "--input", dev},
		// debug took this path too and said "tune eval and tune predict score BERT sequence classifiers".
		{"debug", "nan", "--model", llama, "--input", dev},
		{"debug", "compare", "--model", llama, "--input", dev},
	} {
		code, _, stderr := runCLI(args...)
		if code != exitUsage || !strings.Contains(stderr, "is a llama causal language model") || strings.Contains(stderr, "gelu") ||
			!strings.Contains(stderr, "tune "+args[0]) {
			t.Errorf("%s on a Llama: exit %d, %s", args[0], code, stderr)
		}
	}
	bertDir, _ := tinyModelDir(t)
	code, _, stderr := runCLI("generate", "--model", bertDir, "--prompt", "x")
	if code != exitUsage || !strings.Contains(stderr, "is a BERT encoder") || strings.Contains(stderr, "--tokenizer") {
		t.Errorf("generate on a BERT: exit %d, %s", code, stderr)
	}
}
