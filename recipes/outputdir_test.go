package recipes

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInputInOutputDir: a run must not write where it reads its model or tokenizer from, however the two paths
// are spelled (symbolic links, a checkpoint of the same output_dir).
func TestInputInOutputDir(t *testing.T) {
	root := t.TempDir()
	model := filepath.Join(root, "model")
	runs := filepath.Join(root, "runs", "full")
	ckpt := filepath.Join(runs, "checkpoint-10")
	backup := filepath.Join(runs, "checkpoint-backup")
	for _, d := range []string{model, ckpt, backup, filepath.Join(root, "other")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(model, "vocab.txt"), []byte("[PAD]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "modellink")
	if err := os.Symlink(model, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, model, tokenizer, out string
		wantKey                     string
	}{
		{"the model folder itself", model, "", model, "model.path"},
		{"spelled with ./ and ..", model, "", filepath.Join(model, "..", "model") + "/", "model.path"},
		{"a symbolic link to the model folder", model, "", link, "model.path"},
		{"the tokenizer file's folder", "", filepath.Join(model, "vocab.txt"), model, "tokenizer.path"},
		{"a checkpoint inside output_dir", ckpt, "", runs, "model.path"},
		{"a user folder that only looks like a checkpoint", backup, "", runs, ""},
		{"an unrelated output_dir", model, model, filepath.Join(root, "other"), ""},
		{"an output_dir that does not exist yet", model, model, filepath.Join(root, "new"), ""},
		{"a relative input against an absolute output_dir", relTo(t, model), "", model, "model.path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &Recipe{}
			r.Model.Path, r.Tokenizer.Path, r.Training.OutputDir = c.model, c.tokenizer, c.out
			if key, _ := r.inputInOutputDir(); key != c.wantKey {
				t.Errorf("inputInOutputDir() = %q, want %q", key, c.wantKey)
			}
		})
	}
}

// relTo returns p relative to the working directory.
func relTo(t *testing.T, p string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, p)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// TestOutputDirTilde: training.output_dir=~/runs/x (which the shell does not expand inside the word) is the
// home directory's runs/x, as transformers expands output_dir; before, the run wrote into ./~/runs/x.
func TestOutputDirTilde(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	r, err := Load("tiny", []string{"training.output_dir=~/runs/x"})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, "runs", "x"); r.Training.OutputDir != want {
		t.Errorf("output_dir = %q, want %q", r.Training.OutputDir, want)
	}
	r, err = Load("tiny", []string{"training.output_dir=a~/b"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Training.OutputDir != "a~/b" {
		t.Errorf("output_dir = %q, want a~/b unchanged", r.Training.OutputDir)
	}
}
