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

// TestValidatePrintsTheDecoderKeys: tune validate printed a decoder's recipe with data.text_column sentence and
// data.label_column label, the sequence-classification defaults its data do not have, and the printed recipe
// then failed tune validate ("data.text_column: does not apply to causal-LM (SFT) data"). They are left out
// for a decoder, also when its checkpoint is not there yet and the recipe says it is one (lora.task_type
// CAUSAL_LM, data.packing); a BERT recipe still prints them.
func TestValidatePrintsTheDecoderKeys(t *testing.T) {
	testutil.IsolateCache(t)
	bertOnly := []string{"text_column:", "label_column:", "text_pair_column:", "num_labels:", "modules_to_save:\n    - classifier"}
	for _, c := range []struct {
		args []string
		bert bool
	}{
		{[]string{"validate", "tiny-chat"}, false},
		{[]string{"validate", "--no-files", "llama-lora"}, false},
		{[]string{"validate", "--no-files", "gpt2-full"}, false},
		{[]string{"validate", "tiny"}, true},
		{[]string{"validate", "--no-files", "bert"}, true},
	} {
		code, stdout, stderr := runCLI(c.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		for _, k := range bertOnly[:2] {
			if has := strings.Contains(stdout, k); has != c.bert {
				t.Errorf("%v: printed %q: %v, want %v:\n%s", c.args, k, has, c.bert, stdout)
			}
		}
		if !c.bert {
			for _, k := range bertOnly[2:] {
				if strings.Contains(stdout, k) {
					t.Errorf("%v: printed %q:\n%s", c.args, k, stdout)
				}
			}
		}
		if c.args[1] == "--no-files" {
			continue
		}
		// What validate prints is a recipe that validates, to the same resolved recipe.
		p := filepath.Join(t.TempDir(), "printed.yaml")
		os.WriteFile(p, []byte(stdout), 0o644)
		code, again, stderr := runCLI("validate", p)
		if code != 0 || again != stdout {
			t.Errorf("%v: the printed recipe: exit %d, %s\n%s", c.args, code, stderr, again)
		}
	}
}
