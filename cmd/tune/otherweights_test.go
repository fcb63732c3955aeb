package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestPickleWeightsAreNamed: a model folder holding pytorch_model.bin instead of model.safetensors is named as
// such, with the transformers line that converts it, by inspect (which said only "no weights"), eval and
// validate (which passed it, and finetune then failed with exit 1 after loading the data); eval, validate,
// finetune and generate exit 2 (findings4).
func TestPickleWeightsAreNamed(t *testing.T) {
	testutil.IsolateCache(t)
	root := testutil.RepoRoot(t)
	bertDir, chatDir := filepath.Join(t.TempDir(), "bert"), filepath.Join(t.TempDir(), "chat")
	for src, dst := range map[string]string{filepath.Join(root, "testdata", "safetensors", "bert-tiny"): bertDir,
		filepath.Join(root, "recipes", "data", "tiny-chat"): chatDir} {
		if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dst, "model.safetensors"))
		os.WriteFile(filepath.Join(dst, "pytorch_model.bin"), []byte("PK pickle"), 0o644)
	}
	tiny := filepath.Join(root, "recipes", "data", "tiny")
	dev := filepath.Join(tiny, "dev.tsv")
	convert := func(dir, class string) string {
		return "found pytorch_model.bin: PyTorch's pickle format, which tune does not read (loading a pickle can run code); " +
			"convert it once with transformers: python -c 'from transformers import " + class + ` as M; M.from_pretrained("` + dir +
			`").save_pretrained("` + dir + `", safe_serialization=True)' writes model.safetensors beside it`
	}
	bertHint, chatHint := convert(bertDir, "BertForSequenceClassification"), convert(chatDir, "LlamaForCausalLM")
	code, stdout, stderr := runCLI("inspect", bertDir)
	if code != exitOK || !strings.Contains(stdout, "no weights: ") || !strings.Contains(stdout, bertHint) {
		t.Errorf("inspect: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, c := range []struct {
		args []string
		hint string
	}{
		{[]string{"eval", "--device", "cpu", "--model", bertDir, "--tokenizer", tiny, "--data", dev}, bertHint},
		{[]string{"validate", filepath.Join(root, "recipes", "bert.yaml"), "model.path=" + bertDir, "tokenizer.path=" + tiny,
			"data.train=" + dev, "data.eval=" + dev, "data.max_length=16"}, bertHint},
		{[]string{"finetune", "--device", "cpu", "tiny-chat", "model.path=" + chatDir, "training.output_dir=" + filepath.Join(t.TempDir(), "o")}, chatHint},
		{[]string{"generate", "--device", "cpu", "--model", chatDir, "--prompt", "hi"}, chatHint},
	} {
		code, _, stderr := runCLI(c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.hint) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 with %q", c.args[0], code, stderr, c.hint)
		}
	}
}
