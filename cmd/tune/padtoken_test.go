package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestPadTokenNotInVocab (tester10 T10-11): a tokenizer_config.json whose pad_token is not in the vocabulary
// made finetune exit 1 after the model had loaded, saying to "set pad_token in tokenizer_config.json", which it
// was. It is bad input (exit 2) under tokenizer.path, naming the token and the file, before training starts.
func TestPadTokenNotInVocab(t *testing.T) {
	tok, cfg, out := padlessTokenizer(t)
	code, stdout, stderr := runCLI("finetune", "--device", "cpu", tinyRecipe, "tokenizer.path="+tok, "training.output_dir="+out,
		"training.max_steps=1", "training.eval_strategy=no")
	want := padlessMessage(tok, cfg)
	if code != exitUsage || !strings.Contains(stderr, want) {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d with %q", code, stdout, stderr, exitUsage, want)
	}
}

// TestValidateChecksThePadToken (tester12): tune validate passed a recipe whose tokenizer has no padding token,
// which finetune then refused. validate now loads the tokenizer and refuses it the same way, exit 2, and
// --no-files still skips it.
func TestValidateChecksThePadToken(t *testing.T) {
	tok, cfg, out := padlessTokenizer(t)
	code, stdout, stderr := runCLI("validate", tinyRecipe, "tokenizer.path="+tok, "training.output_dir="+out)
	want := padlessMessage(tok, cfg)
	if code != exitUsage || !strings.Contains(stderr, want) {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d with %q", code, stdout, stderr, exitUsage, want)
	}
	if code, _, stderr := runCLI("validate", "--no-files", tinyRecipe, "tokenizer.path="+tok, "training.output_dir="+out); code != 0 {
		t.Errorf("validate --no-files: exit %d, want 0\nstderr:\n%s", code, stderr)
	}
}

// padlessTokenizer copies the tiny tokenizer into a new folder with a tokenizer_config.json whose pad_token is
// not in the vocabulary, and returns that folder, the config's path and an output_dir that does not exist yet.
func padlessTokenizer(t *testing.T) (tok, cfg, out string) {
	t.Helper()
	testutil.IsolateCache(t)
	tok = filepath.Join(t.TempDir(), "tok")
	copyDir(t, filepath.Join("..", "..", "recipes", "data", "tiny"), tok)
	cfg = filepath.Join(tok, "tokenizer_config.json")
	if err := os.WriteFile(cfg, []byte(`{"pad_token": "<pad>", "model_max_length": 64}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return tok, cfg, filepath.Join(t.TempDir(), "out")
}

// padlessMessage is the error finetune and validate give for padlessTokenizer's tokenizer.
func padlessMessage(tok, cfg string) string {
	return `tokenizer.path: tokenizer ` + filepath.Join(tok, "tokenizer.json") + ` has no padding token: pad_token "<pad>" ` +
		`(tokenizer_config.json's pad_token) is not in its vocabulary; set it in ` + cfg
}
