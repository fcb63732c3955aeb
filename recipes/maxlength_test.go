package recipes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestMaxLengthBeyondCheckpointPositions: `tune finetune recipes/bert.yaml model.path=CKPT` with the recipe's
// data.max_length 128 on a checkpoint whose max_position_embeddings is 64 is refused before anything loads,
// naming data.max_length and the limit, as model.config's is; before, the run died at the first long row.
func TestMaxLengthBeyondCheckpointPositions(t *testing.T) {
	ckpt := t.TempDir()
	src := testutil.Testdata(t, "safetensors", "reference", "seqcls") // max_position_embeddings 64
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(ckpt, f), b, 0o644)
	}
	full, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "recipes", "data", "tiny", "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	vocab := filepath.Join(ckpt, "vocab.txt")
	os.WriteFile(vocab, seqclsVocab(full), 0o644)
	data := filepath.Join(testutil.RepoRoot(t), "recipes", "data", "tiny", "train.tsv")
	bert, err := Lookup("bert")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		maxLength string
		want      string
	}{
		{"128", "data.max_length: 128 exceeds the model's max_position_embeddings 64 (" + filepath.Join(ckpt, "config.json") + ", model.path): sequences longer than that have no position embedding; set data.max_length=64 or less"},
		{"64", ""},
	} {
		r, err := Decode(bert, "embedded:bert", ".", []string{"model.path=" + ckpt, "tokenizer.path=" + vocab,
			"data.train=" + data, "data.eval=" + data, "data.max_length=" + c.maxLength, "training.output_dir=" + t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		err = r.CheckFiles()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("max_length %s: %v", c.maxLength, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrInvalid)):
			t.Errorf("max_length %s: %v\nwant %s", c.maxLength, err, c.want)
		}
	}
}
