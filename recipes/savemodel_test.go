package recipes

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/trainer"
)

// TestRunSaveModelWritesTheTokenizer: a Go program that trains a recipe and saves with Run.SaveModel gets a
// directory tune predict and OpenModel load as is (Trainer.SaveModel alone leaves out the tokenizer, and
// `tune predict --model DIR` failed on it).
func TestRunSaveModelWritesTheTokenizer(t *testing.T) {
	testutil.IsolateCache(t)
	r, err := Load("tiny", []string{"training.max_steps=1", "training.eval_strategy=no", "training.save_strategy=no",
		"training.output_dir=" + filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenDevice("cpu")
	if err != nil {
		t.Fatal(err)
	}
	run, err := Build(r, b, trainer.WithOutput(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	defer run.Trainer.Close()
	if _, err := run.Trainer.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "model")
	if err := run.SaveModel(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "vocab.txt")); err != nil {
		t.Errorf("no tokenizer saved: %v", err)
	}
	if _, err := OpenModel(dir, "", "", b); err != nil {
		t.Errorf("OpenModel on the saved directory: %v", err)
	}
}
