package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestFinetuneEpochsBeyondTheStepCount: num_train_epochs 1e15 passes validation, but times tiny's 125 steps an
// epoch it exceeds the 1e15 steps a run counts (on a 60,614-row training set it passed 2^63 and failed with
// "warmup steps (-922337203685477632) and total steps (-9223372036854775808) must be >= 0", exit 1). It is
// bad usage naming training.num_train_epochs, and nothing is written.
func TestFinetuneEpochsBeyondTheStepCount(t *testing.T) {
	testutil.IsolateCache(t)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errOut := runTune(t, "finetune", tinyRecipe, "training.num_train_epochs=1e15", "training.max_steps=-1",
		"training.output_dir="+out)
	if code != exitUsage || !strings.Contains(errOut, "training.num_train_epochs: 1e+15 epochs of 125 steps make 1.25e+17 steps") {
		t.Errorf("exit %d, stderr %q; want exit %d naming training.num_train_epochs", code, errOut, exitUsage)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s was written", out)
	}
}
