package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/trainer"
)

// TestMalformedJSONNamesTheFile (tester10 T10-12): a malformed tokenizer_config.json or tokenizer.json gave
// encoding/json's message alone ("invalid character ','" with no place, "json: cannot unmarshal array into Go
// value of type loaders.tokenizerConfig"). Each is now an input error (exit 2) naming the file, the line and
// column or the key, in JSON's terms, for eval (BERT) and generate (a decoder) alike.
func TestMalformedJSONNamesTheFile(t *testing.T) {
	testutil.IsolateCache(t)
	bert, gpt2 := tinyCheckpoint(t), tinyGPT2(t)
	data := filepath.Join("..", "..", "recipes", "data", "tiny", "dev.tsv")
	for _, c := range []struct {
		name, file, content, want string
	}{
		{"a syntax error in tokenizer_config.json", "tokenizer_config.json", "{\n  \"a\": 1,,\n}",
			"tokenizer_config.json: invalid JSON: line 2 column 10: invalid character ','"},
		{"a list for tokenizer_config.json", "tokenizer_config.json", "[1, 2]",
			"tokenizer_config.json: line 1 column 1: want an object, got a list; fix the file, or replace it with the tokenizer's own"},
		{"a number for tokenizer.json's model", "tokenizer.json", `{"model": 5}`, `"model"`},
	} {
		for _, m := range []struct{ kind, dir string }{{"bert", bert}, {"gpt2", gpt2}} {
			t.Run(c.name+" "+m.kind, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "m")
				copyDir(t, m.dir, dir)
				if err := os.WriteFile(filepath.Join(dir, c.file), []byte(c.content), 0o644); err != nil {
					t.Fatal(err)
				}
				args := []string{"eval", "--device", "cpu", "--model", dir, "--data", data}
				if m.kind == "gpt2" {
					args = []string{"generate", "--device", "cpu", "--model", dir, "--prompt", "hi", "--max-new-tokens", "1"}
				}
				code, _, stderr := runCLI(args...)
				if code != exitUsage || !strings.Contains(stderr, filepath.Join(dir, c.file)) || !strings.Contains(stderr, c.want) {
					t.Errorf("exit %d, stderr:\n%s\nwant exit %d naming %s with %q", code, stderr, exitUsage, c.file, c.want)
				}
				for _, leak := range []string{"Go value", "Go struct", "unmarshal", "tokenizers: ", "loaders: "} {
					if strings.Contains(stderr, leak) {
						t.Errorf("stderr has %q:\n%s", leak, stderr)
					}
				}
			})
		}
	}
}

// TestMalformedTrainerState: a trainer_state.json whose global_step is not an integer (edited: 2.5, "x", 1e15)
// was refused with "json: cannot unmarshal number 2.5 into Go struct field TrainerState.global_step of type int";
// the message names the file, the line and the key.
func TestMalformedTrainerState(t *testing.T) {
	testutil.IsolateCache(t)
	ck := tinyResumeCheckpoint(t)
	for _, c := range []struct{ value, want string }{
		{"2.5", `"global_step": want an integer, got the number 2.5`},
		{`"x"`, `"global_step": want an integer, got a string`},
		{"1e15", `"global_step": want an integer, got the number 1e15`},
	} {
		t.Run(c.value, func(t *testing.T) {
			dir := editTrainerState(t, ck, c.value)
			code, _, stderr := runCLI("finetune", "--device", "cpu", tinyRecipe, "training.output_dir="+filepath.Join(t.TempDir(), "out"),
				"training.eval_strategy=no", "training.max_steps=20", "training.resume_from_checkpoint="+dir)
			if code != exitUsage || !strings.Contains(stderr, filepath.Join(dir, "trainer_state.json")+": line ") ||
				!strings.Contains(stderr, c.want) || strings.Contains(stderr, "Go struct") {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d with %q", code, stderr, exitUsage, c.want)
			}
		})
	}
}

// TestOverrideNotYAML: an override value that is not YAML is named with the value, without yaml.v3's "yaml:
// line 1:" prefix, and says how to pass a string.
func TestOverrideNotYAML(t *testing.T) {
	code, _, stderr := runCLI("validate", tinyRecipe, "training.output_dir=[")
	want := `training.output_dir: the value "[" is not valid YAML (did not find expected node content); for a string`
	if code != exitUsage || !strings.Contains(stderr, want) || strings.Contains(stderr, "yaml: ") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit %d with %q", code, stderr, exitUsage, want)
	}
}

// tinyResumeCheckpoint trains the tiny recipe for 4 steps with a checkpoint at step 4 and returns that
// checkpoint's folder.
func tinyResumeCheckpoint(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runCLI("finetune", "--device", "cpu", tinyRecipe, "training.output_dir="+out, "training.max_steps=4",
		"training.eval_strategy=no", "training.save_strategy=steps", "training.save_steps=4")
	if code != exitOK {
		t.Fatalf("finetune exit %d\n%s\n%s", code, stdout, stderr)
	}
	return filepath.Join(out, "checkpoint-4")
}

// editTrainerState copies checkpoint ck to a new folder with trainer_state.json's global_step set to value (raw
// JSON) and the manifest written again, so that the checkpoint passes its checksums: what a hand edit followed
// by a manifest of its own (or another program's checkpoint) gives.
func editTrainerState(t *testing.T, ck, value string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), filepath.Base(ck))
	copyDir(t, ck, dir)
	p := filepath.Join(dir, trainer.TrainerStateName)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	edited := regexp.MustCompile(`"global_step": [^,]*,`).ReplaceAll(b, []byte(`"global_step": `+value+`,`))
	if string(edited) == string(b) && value != "4" {
		t.Fatalf("%s has no global_step to edit", p)
	}
	if err := os.WriteFile(p, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := trainer.WriteCheckpointManifest(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGenerationConfigValues (tester10 T10-15): bad values in generation_config.json exited 1 (a string
// eos_token_id) or passed (an eos_token_id past the vocabulary, which generation never meets). tune generate
// exits 2 naming the file, the key and the value.
func TestGenerationConfigValues(t *testing.T) {
	testutil.IsolateCache(t)
	model := tinyGPT2(t)
	for _, c := range []struct{ content, want string }{
		{`{"eos_token_id": "x"}`, `generation_config.json: eos_token_id "x": want a token id`},
		{`{"eos_token_id": 5000}`, `generation_config.json: eos_token_id 5000 is not a token of the model, whose vocabulary has ids 0 to 701`},
		{`{"temperature": -1}`, `generation_config.json: temperature -1: want a number ≥ 0`},
	} {
		t.Run(c.content, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "m")
			copyDir(t, model, dir)
			if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := runCLI("generate", "--device", "cpu", "--model", dir, "--prompt", "hi", "--max-new-tokens", "1")
			if code != exitUsage || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d with %q", code, stderr, exitUsage, c.want)
			}
		})
	}
}
