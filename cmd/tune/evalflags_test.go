package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestEvalAndPredictFlagBounds: tune eval ran --batch-size 0 and -1 with the default batch (predict refuses
// them), --max-length 2 scored every row from [CLS] [SEP] alone (the recipe's data.max_length needs 3), and
// --format parquet exited 1 (findings5 #19; now 2, the loaders' errors being bad input: TestBadInputFilesExit2).
// The flags are bad usage now, before the model loads.
func TestEvalAndPredictFlagBounds(t *testing.T) {
	testutil.IsolateCache(t)
	root := testutil.RepoRoot(t)
	model := filepath.Join(root, "testdata", "safetensors", "bert-tiny")
	tiny := filepath.Join(root, "recipes", "data", "tiny")
	dev := filepath.Join(tiny, "dev.tsv")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "--model", model, "--tokenizer", tiny, "--data", dev, "--batch-size", "0"}, "--batch-size must be ≥ 1"},
		{[]string{"eval", "--model", model, "--tokenizer", tiny, "--data", dev, "--batch-size", "-1"}, "--batch-size must be ≥ 1"},
		{[]string{"predict", "--model", model, "--tokenizer", tiny, "--input", dev, "--max-length", "2"}, "--max-length must be at least 3"},
		{[]string{"eval", "--model", model, "--tokenizer", tiny, "--data", dev, "--max-length", "2"}, "--max-length must be at least 3"},
	} {
		code, _, stderr := runCLI(append(c.args, "--device", "cpu")...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 with %q", c.args, code, stderr, c.want)
		}
	}
}
