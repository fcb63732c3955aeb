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

// TestFinetuneOverwriteKeepsUserFiles (tester10 T10-3): a user's PEFT adapter, generation_config.json and
// results put beside a full fine-tune's output were deleted by the next run with overwrite_output_dir. The run
// records what it wrote (tune_outputs.json), and an overwrite that finds files of a run's names the record does
// not list is refused with exit 2 up front, naming them, with nothing removed; without them it replaces exactly
// the recorded run, other files kept.
func TestFinetuneOverwriteKeepsUserFiles(t *testing.T) {
	testutil.IsolateCache(t)
	dir := filepath.Join(t.TempDir(), "od5")
	run := []string{"finetune", "--device", "cpu", tinyRecipe, "training.output_dir=" + dir, "training.max_steps=2",
		"training.save_steps=1", "training.save_strategy=steps", "training.eval_strategy=no"}
	if code, _, stderr := runCLI(run...); code != exitOK {
		t.Fatalf("first run: exit %d %s", code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "tune_outputs.json"))
	if err != nil || !strings.Contains(string(b), `"model.safetensors"`) || !strings.Contains(string(b), `"trainer_state.json"`) ||
		!strings.Contains(string(b), `"train_results.json"`) || strings.Contains(string(b), "adapter") {
		t.Fatalf("the run's record: %s %v", b, err)
	}
	user := []string{"adapter_model.safetensors", "adapter_config.json", "generation_config.json", "test_results.json", "notes.txt"}
	for _, f := range user {
		os.WriteFile(filepath.Join(dir, f), []byte("user "+f), 0o644)
	}
	code, stdout, stderr := runCLI(append(run, "training.overwrite_output_dir=true")...)
	if code != exitUsage || !strings.Contains(stderr, dir+" holds adapter_config.json, adapter_model.safetensors, "+
		"generation_config.json, test_results.json, which its previous run did not write") ||
		strings.Contains(stdout, "data:") {
		t.Fatalf("overwrite beside the user's files: exit %d, stdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, f := range append(user, "model.safetensors", "trainer_state.json", "checkpoint-2") {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s was removed: %v", f, err)
		}
	}
	for _, f := range user[:4] {
		os.Remove(filepath.Join(dir, f))
	}
	if code, _, stderr := runCLI(append(run, "training.overwrite_output_dir=true", "training.max_steps=1")...); code != exitOK {
		t.Fatalf("overwrite of the recorded run: exit %d %s", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "user notes.txt" {
		t.Errorf("notes.txt is %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoint-2")); err == nil {
		t.Error("the first run's checkpoint-2 is still there")
	}
}
