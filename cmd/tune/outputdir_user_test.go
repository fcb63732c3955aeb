package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestFinetuneRefusesAUserFolder: a training.output_dir that is not empty but holds no run is refused (exit 2)
// with the key and both ways on, and nothing in it changes; with overwrite_output_dir the run is written beside
// the user's files. The filesystem root is refused by validate and finetune alike, before a lock file is made.
func TestFinetuneRefusesAUserFolder(t *testing.T) {
	testutil.IsolateCache(t)
	dir := filepath.Join(t.TempDir(), "mine")
	os.MkdirAll(filepath.Join(dir, "photos"), 0o755)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("keep me"), 0o644)
	run := []string{"finetune", "--device", "cpu", tinyRecipe, "training.max_steps=1", "training.eval_strategy=no", "training.save_strategy=no"}
	code, _, stderr := runCLI(append(run, "training.output_dir="+dir)...)
	if code != exitUsage || !strings.Contains(stderr, "training.output_dir "+dir+" is not empty (notes.txt, photos/) and holds no training run") ||
		!strings.Contains(stderr, "training.overwrite_output_dir=true") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("the refused run changed the folder: %v", entries)
	}
	if code, _, stderr := runCLI(append(run, "training.output_dir="+dir, "training.overwrite_output_dir=true")...); code != exitOK {
		t.Fatalf("with overwrite_output_dir: exit %d %s", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "keep me" {
		t.Fatalf("notes.txt became %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"validate", "finetune"} {
		code, _, stderr := runCLI(cmd, "--device", "cpu", tinyRecipe, "training.output_dir=/", "training.overwrite_output_dir=true")
		if code != exitUsage || !strings.Contains(stderr, "training.output_dir: / is the root of the file system") {
			t.Errorf("%s with output_dir /: exit %d %s", cmd, code, stderr)
		}
	}
}

// TestFinetuneAfterAnInterruptBeforeAnyCheckpoint: a run stopped before its first checkpoint (Ctrl-C,
// timeout(1)) leaves only its metrics.jsonl, and the same command again was refused with exit 2, with
// training.overwrite_output_dir=true too. It now trains, keeping that log as metrics.jsonl.1 and saying so.
func TestFinetuneAfterAnInterruptBeforeAnyCheckpoint(t *testing.T) {
	testutil.IsolateCache(t)
	dir := filepath.Join(t.TempDir(), "out")
	os.MkdirAll(dir, 0o755)
	old := `{"epoch":0.008,"grad_norm":0.2,"learning_rate":5e-05,"loss":0.69,"step":1}` + "\n"
	os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(old), 0o644)
	code, _, stderr := runCLI("finetune", "--device", "cpu", tinyRecipe, "training.output_dir="+dir, "training.max_steps=1",
		"training.eval_strategy=no", "training.save_strategy=no")
	if code != exitOK || !strings.Contains(stderr, "held only the metrics.jsonl of a run stopped before its first checkpoint: kept as metrics.jsonl.1") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "metrics.jsonl.1")); string(b) != old {
		t.Errorf("metrics.jsonl.1 is %q, want the interrupted run's log %q", b, old)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		t.Error(err)
	}
}

// TestFinetuneOverwriteForeignCheckpointFile: overwrite_output_dir over a run whose checkpoint-N folder holds a
// user's file is refused with exit 2 (bad input, as a folder of model files without a run is), before the data
// and model are built, and nothing is removed (tester10 T10-4: exit 1, after "data: ..." was printed).
func TestFinetuneOverwriteForeignCheckpointFile(t *testing.T) {
	testutil.IsolateCache(t)
	dir := filepath.Join(t.TempDir(), "od5")
	os.MkdirAll(filepath.Join(dir, "checkpoint-99"), 0o755)
	os.WriteFile(filepath.Join(dir, "trainer_state.json"), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(dir, "checkpoint-99", "mine.txt"), []byte("u"), 0o644)
	code, stdout, stderr := runCLI("finetune", "--device", "cpu", tinyRecipe, "training.output_dir="+dir,
		"training.max_steps=1", "training.overwrite_output_dir=true")
	if code != exitUsage || !strings.Contains(stderr, filepath.Join(dir, "checkpoint-99")+" holds mine.txt, which no tune checkpoint writes") ||
		strings.Contains(stdout, "device:") || strings.Contains(stdout, "data:") {
		t.Fatalf("exit %d, stdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, f := range []string{"trainer_state.json", "checkpoint-99/mine.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s was removed: %v", f, err)
		}
	}
}
