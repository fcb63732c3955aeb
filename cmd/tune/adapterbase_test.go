package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/lora"
)

// TestAdapterOnAnotherBase (tester13): eval and predict applied an adapter whose adapter_config.json names
// another base model to --model and exited 0 with a wrong model's metrics, where merge refuses the same pair.
// They (and debug, and generate, through checkAdapterBase) now refuse it, exit 2, naming both models and
// --force-base; with --force-base they go on with a warning.
func TestAdapterOnAnotherBase(t *testing.T) {
	model, adapter, _, _ := mergeFixture(t)
	other, _, _, _ := mergeFixture(t) // same shapes, different weights
	absOther, err := filepath.Abs(other)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := lora.ReadAdapterConfig(adapter)
	if err != nil {
		t.Fatal(err)
	}
	if err := lora.WriteAdapterConfig(adapter, cfg, absOther); err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(t.TempDir(), "in.tsv")
	if err := os.WriteFile(input, []byte("sentence\tlabel\nsome text\t1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"predict", "--model", model, "--adapter", adapter, "--input", input},
		{"eval", "--model", model, "--adapter", adapter, "--data", input},
		{"debug", "compare", "--model", model, "--adapter", adapter, "--input", input},
	} {
		t.Run(cmd[0], func(t *testing.T) {
			code, _, stderr := runTune(t, cmd...)
			want := `the adapter was trained on base_model_name_or_path "` + absOther + `"`
			if code != exitUsage || !strings.Contains(stderr, want) || !strings.Contains(stderr, "but --model is "+model) ||
				!strings.Contains(stderr, "--force-base") {
				t.Fatalf("exit %d, want %d refusing the other base (%q, --force-base); stderr %q", code, exitUsage, want, stderr)
			}
			_, _, stderr = runTune(t, append(cmd, "--force-base")...)
			if !strings.Contains(stderr, "tune: warning: "+want) || !strings.Contains(stderr, "applying it anyway: --force-base") {
				t.Errorf("with --force-base: stderr %q lacks the warning", stderr)
			}
			if strings.Contains(stderr, "gives a wrong model; pass") {
				t.Errorf("with --force-base it still refused: %q", stderr)
			}
		})
	}
}

// TestAdapterOfAnotherShapeIsBadInput (verifier of tester13's fixes): an adapter whose tensors do not fit
// --model's shapes (forced past the base check) exited 1, "retry may work", where a rank mismatch exits 2.
// It is bad input too: exit 2, naming the adapter's weights.
func TestAdapterOfAnotherShapeIsBadInput(t *testing.T) {
	_, adapter, _, _ := mergeFixture(t) // hidden 32
	other, _ := tinyModelDir(t)         // another hidden size
	for _, cmd := range [][]string{
		{"merge", "--model", other, "--adapter", adapter, "--output", filepath.Join(t.TempDir(), "m"), "--force"},
		{"merge", "--model", other, "--adapter", adapter, "--output", filepath.Join(t.TempDir(), "m"), "--force-base"},
	} {
		code, _, stderr := runTune(t, cmd...)
		if code != exitUsage || !strings.Contains(stderr, "does not fit this model and adapter config") {
			t.Errorf("%q: exit %d, want %d naming the misfit; stderr %q", cmd, code, exitUsage, stderr)
		}
	}
}
