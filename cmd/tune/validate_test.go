package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/internal/testutil"
)

// writeRecipe writes a recipe whose data file exists next to it and whose output_dir is dir/out.
func writeRecipe(t *testing.T, dir, training string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "train.tsv"), []byte("sentence\tlabel\nok\t1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := "model:\n  config:\n    vocab_size: 256\n    hidden_size: 64\n    num_attention_heads: 4\n" +
		"tokenizer:\n  path: " + filepath.Join("..", "..", "recipes", "data", "tiny") + "\n" +
		"data:\n  train: train.tsv\n" +
		"training:\n  output_dir: " + filepath.Join(dir, "out") + "\n" + training
	p := filepath.Join(dir, "r.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidate(t *testing.T) {
	testutil.IsolateCache(t)
	dir := t.TempDir()
	// The recipe's tokenizer path is relative to the recipe, so put the recipe two levels below the repo.
	work := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	if err := os.Symlink(filepath.Join(repo, "recipes"), filepath.Join(dir, "recipes")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		args      []string
		training  string
		code      int
		stdout    string // fragment of stdout
		stderr    string // fragment of stderr
		noOutDirs bool
	}{
		{"the embedded tiny recipe is valid and printed resolved", []string{"validate", "tiny"}, "", exitOK,
			"hidden_size: 64", "", false},
		{"overrides are applied", []string{"validate", "tiny", "training.learning_rate=5e-4"}, "", exitOK,
			"learning_rate: 0.0005", "", false},
		{"a typo is exit 2 with the closest key, and creates nothing", []string{"validate", "FILE"}, "  learnig_rate: 2e-5\n",
			exitUsage, "", "r.yaml:12: unknown key 'learnig_rate' in training; did you mean 'learning_rate'?", true},
		{"fp16 and bf16 together is exit 2 (bf16 without loss scaling, torch.amp's GradScaler is for float16)", []string{"validate", "FILE"}, "  fp16: true\n  bf16: true\n",
			exitUsage, "", "training.bf16: fp16 and bf16 are both true", true},
		{"a bad override is exit 2", []string{"validate", "FILE", "training.learning_rate=.inf"}, "",
			exitUsage, "", "override training.learning_rate=.inf: training.learning_rate: must be a finite number", true},
		{"a missing data file is exit 2", []string{"validate", "FILE", "data.train=/nonexistent/x.tsv"}, "",
			exitUsage, "", "data.train: /nonexistent/x.tsv: no such file or directory", true},
		{"an output_dir that is a file is exit 2, before anything is loaded", []string{"validate", "FILE", "training.output_dir=FILE"}, "",
			exitUsage, "", "r.yaml is a file, not a directory", true},
		{"a vocab_size beyond 32 bits is exit 2, not the Go runtime's out of memory", []string{"validate", "FILE", "model.config.vocab_size=3000000000"}, "",
			exitUsage, "", "override model.config.vocab_size=3000000000: model.config.vocab_size: 3000000000 is more than 2147483647", true},
		{"100000 layers is exit 2", []string{"validate", "FILE", "model.config.num_hidden_layers=100000"}, "",
			exitUsage, "", "model.config.num_hidden_layers: 100000 makes a model of", true},
		{"--no-files skips the file check", []string{"validate", "--no-files", "FILE", "data.train=/nonexistent/x.tsv"}, "",
			exitOK, "train: /nonexistent/x.tsv", "", true},
		{"an unknown embedded name suggests the closest", []string{"validate", "tinyy"}, "",
			exitUsage, "", `did you mean "tiny"?`, true},
		{"a missing recipe file is exit 2", []string{"validate", "nope/r.yaml"}, "", exitUsage, "", "no such file", true},
		{"no recipe is exit 2", []string{"validate"}, "", exitUsage, "", "needs a RECIPE", true},
		{"LoRA warnings go to stderr", []string{"validate", "LORA", "lora.fan_in_fan_out=true", "training.output_dir=" + filepath.Join(work, "out")}, "",
			exitOK, "fan_in_fan_out: false", "warning: ", true},
		{"LoRA on model.config is exit 2: the random base would never be saved", []string{"validate", "FILE", "lora.r=8"}, "",
			exitUsage, "", "lora: trains adapters on a frozen base model, but model.config builds a new model from random weights", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeRecipe(t, work, c.training)
			args := make([]string, len(c.args))
			for i, a := range c.args {
				if a == "LORA" {
					a = tinyLoRARecipe(t)
				}
				args[i] = strings.ReplaceAll(a, "FILE", p)
			}
			code, out, errOut := runTune(t, args...)
			if code != c.code || !strings.Contains(out, c.stdout) || !strings.Contains(errOut, c.stderr) {
				t.Errorf("tune %v: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s\nwant stdout ∋ %q, stderr ∋ %q",
					args, code, c.code, out, errOut, c.stdout, c.stderr)
			}
			if _, err := os.Stat(filepath.Join(work, "out")); c.noOutDirs && err == nil {
				t.Errorf("validate created the output directory")
			}
		})
	}
}

// TestValidateTakesFinetuneFlags: a tune finetune command line validates as is, --cuda-graphs included
// (findings6: validate refused --cuda-graphs as an unknown flag).
func TestValidateTakesFinetuneFlags(t *testing.T) {
	code, out, stderr := runCLI("validate", "--bf16", "--cuda-graphs", "--device", "cpu", "tiny")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{"cuda_graphs: true", "bf16: true"} {
		if !strings.Contains(out, w) {
			t.Errorf("resolved recipe lacks %q:\n%s", w, out)
		}
	}
}

// TestValidateWarnsOfAMissingDevice (tester13): validate passed device: cuda in a binary without CUDA, which
// finetune then refused with exit 3. The recipe may be meant for another machine, so validate still succeeds,
// with a warning that finetune would exit 3 here.
func TestValidateWarnsOfAMissingDevice(t *testing.T) {
	if cuda.Available() {
		t.Skip("a CUDA device is available here")
	}
	code, stdout, stderr := runCLI("validate", "--no-files", tinyRecipe, "device=cuda")
	if code != 0 || !strings.Contains(stdout, "device: cuda") {
		t.Fatalf("exit %d, want 0 with the resolved recipe\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if want := "tune: warning: device: cuda is not available here"; !strings.Contains(stderr, want) || !strings.Contains(stderr, "would exit 3") {
		t.Errorf("stderr %q lacks %q ... would exit 3", stderr, want)
	}
}
