package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDeviceFlagTypo checks that a --device value that names no device is bad usage (exit status 2) in every
// command that takes the flag, as the recipe key device is in tune finetune, while a well-formed device that
// this binary cannot open stays exit status 3. "tpu" used to end eval, predict, generate, bench and debug with 1.
func TestDeviceFlagTypo(t *testing.T) {
	model, _ := tinyModelDir(t)
	tiny := filepath.Join("..", "..", "recipes", "data", "tiny")
	dev, vocab := filepath.Join(tiny, "dev.tsv"), filepath.Join(tiny, "vocab.txt")
	llama := filepath.Join("..", "..", "testdata", "sft", "tiny-llama")
	for _, args := range [][]string{
		{"eval", "--model", model, "--tokenizer", vocab, "--data", dev},
		{"predict", "--model", model, "--tokenizer", vocab, "--input", dev},
		{"debug", "nan", "--model", model, "--tokenizer", vocab, "--input", dev},
		{"generate", "--model", llama, "--prompt", "x"},
		{"bench", "--steps", "1"},
	} {
		code, _, stderr := runCLI(append(args, "--device", "tpu")...)
		if code != exitUsage || !strings.Contains(stderr, `--device tpu: must be auto, cpu, cuda or cuda:N`) {
			t.Errorf("%s --device tpu: exit %d, %s", args[0], code, stderr)
		}
		if code, _, stderr := runCLI(append(args, "--device", "cuda:7")...); code != exitNoDevice {
			t.Errorf("%s --device cuda:7: exit %d, want %d: %s", args[0], code, exitNoDevice, stderr)
		}
	}
}
