package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestDecoderTokenizerLargerThanTheVocabulary: a decoder's tokenizer with an id past config.json's vocab_size
// trained until a batch held that token ("forward at step 5: ... ids[115] = 800 is outside [0, 756)", exit 1;
// findings5 #14), where BERT refuses the pair up front. validate, finetune and generate now refuse it before
// anything loads, naming both files (exit 2).
func TestDecoderTokenizerLargerThanTheVocabulary(t *testing.T) {
	testutil.IsolateCache(t)
	dir := filepath.Join(t.TempDir(), "tokbig")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(testutil.RepoRoot(t), "recipes", "data", "tiny-chat"))); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "tokenizer.json")
	var tj map[string]any
	data, _ := os.ReadFile(p)
	if err := json.Unmarshal(data, &tj); err != nil {
		t.Fatal(err)
	}
	tj["added_tokens"] = append(tj["added_tokens"].([]any), map[string]any{"id": 800, "content": "zebra", "single_word": false,
		"lstrip": false, "rstrip": false, "normalized": false, "special": false})
	data, _ = json.Marshal(tj)
	os.WriteFile(p, data, 0o644)
	want := "the tokenizer " + p + " has 801 tokens (its largest id is 800) but the model in "
	for _, args := range [][]string{
		{"validate", "tiny-chat", "tokenizer.path=" + dir},
		{"finetune", "--device", "cpu", "tiny-chat", "tokenizer.path=" + dir, "training.output_dir=" + filepath.Join(t.TempDir(), "o")},
		{"generate", "--device", "cpu", "--model", dir, "--prompt", "a zebra"},
	} {
		code, _, stderr := runCLI(args...)
		if code != exitUsage || !strings.Contains(stderr, want) || !strings.Contains(stderr, "has vocab_size 756") {
			t.Errorf("%s: exit %d, stderr %q", args[0], code, stderr)
		}
	}
}
