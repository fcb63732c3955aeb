package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestInspectOptimizerState: inspect of a checkpoint's optimizer.safetensors listed AdamW's moments, then
// checked them against the config.json beside them and failed "config.json does not describe these weights"
// (findings5 #27). The file is recognised by its metadata (format tune-adamw) and no model check is made.
func TestInspectOptimizerState(t *testing.T) {
	testutil.IsolateCache(t)
	out := filepath.Join(t.TempDir(), "o")
	if code, _, stderr := runCLI("finetune", "--device", "cpu", tinyRecipe, "training.output_dir="+out, "training.max_steps=1",
		"training.eval_strategy=no", "training.save_strategy=steps", "training.save_steps=1"); code != exitOK {
		t.Fatal(stderr)
	}
	code, stdout, stderr := runCLI("inspect", filepath.Join(out, "checkpoint-1", "optimizer.safetensors"))
	if code != exitOK || !strings.Contains(stdout, "holds a training run's optimizer state (format tune-adamw), not model weights") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}
