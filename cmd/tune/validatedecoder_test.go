package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestValidateReadsTheDecoderFiles: tune validate passed a decoder whose chat template does not compile, whose
// tokenizer.json is truncated or whose model.safetensors is truncated, and tune finetune then failed after
// reading the data (exit 1; findings5 #21). validate now loads the tokenizer, compiles the template and reads
// the weights' headers as finetune does; both exit 2 with the same message.
func TestValidateReadsTheDecoderFiles(t *testing.T) {
	testutil.IsolateCache(t)
	src := filepath.Join(testutil.RepoRoot(t), "recipes", "data", "tiny-chat")
	variant := func(name, file string, edit func([]byte) []byte) string {
		dir := filepath.Join(t.TempDir(), name)
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, file)
		b, _ := os.ReadFile(p)
		os.WriteFile(p, edit(b), 0o644)
		return dir
	}
	cut := func(b []byte) []byte { return b[:3000] }
	for _, c := range []struct{ dir, want string }{
		{variant("template", "tokenizer_config.json", func(b []byte) []byte {
			var d map[string]any
			json.Unmarshal(b, &d)
			d["chat_template"] = "{% for m in messages %}{{ m.content }"
			b, _ = json.Marshal(d)
			return b
		}), "tokenizer.path: chat template "},
		{variant("tokenizer", "tokenizer.json", cut), "tokenizer.path: "},
		{variant("weights", "model.safetensors", cut), "model.path: "},
	} {
		for _, cmd := range []string{"validate", "finetune"} {
			args := []string{cmd, "tiny-chat", "model.path=" + c.dir, "tokenizer.path=" + c.dir, "training.output_dir=" + filepath.Join(t.TempDir(), "o")}
			if cmd == "finetune" {
				args = append(args, "--device", "cpu")
			}
			code, _, stderr := runCLI(args...)
			if code != exitUsage || !strings.Contains(stderr, c.want+c.dir) {
				t.Errorf("%s %s: exit %d, stderr %q", cmd, filepath.Base(c.dir), code, stderr)
			}
		}
	}
}
