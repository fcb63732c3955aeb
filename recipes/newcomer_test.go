package recipes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTargetModulesTypoBeforeLoad: a lora.target_modules name that no module of the model has is a recipe
// error from Load, naming the recipe's line, the key, the bad name and the closest valid one, read from the
// checkpoint's config.json alone (the checkpoints here have no weights at all) or from model.config (issue 20,
// item 8). Before, the typo surfaced from lora.Apply only after the weights had loaded.
func TestTargetModulesTypoBeforeLoad(t *testing.T) {
	for _, tt := range []struct {
		name, config, data, targets string
		want                        []string
	}{
		{"llama", filepath.Join("data", "tiny-chat", "config.json"), "train.jsonl", "[q_proj, v_prj]",
			[]string{`"v_prj" in [q_proj, v_prj] matches none`, `did you mean "v_prj" → "v_proj"?`, "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"}},
		{"bert", filepath.Join("..", "testdata", "bert", "saved_by_tune", "config.json"), "train.tsv", "[qurey, value]",
			[]string{`"qurey" in [qurey, value] matches none`, `"qurey" → "query"`, "query, key, value, dense, classifier"}},
		{"gpt2", filepath.Join("..", "testdata", "gpt2", "tiny", "config.json"), "train.jsonl", "[c_atn]",
			[]string{"[c_atn] matched none", `"c_atn" → "c_attn"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ckpt := filepath.Join(dir, "ckpt")
			if err := os.Mkdir(ckpt, 0o755); err != nil {
				t.Fatal(err)
			}
			cfg, err := os.ReadFile(tt.config)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(ckpt, "config.json"), cfg, 0o644)
			recipe := filepath.Join(dir, "r.yaml")
			os.WriteFile(recipe, []byte("model:\n  path: ckpt\ndata:\n  train: "+tt.data+"\nlora:\n  r: 4\n  target_modules: "+
				tt.targets+"\ntraining:\n  output_dir: out\n"), 0o644)
			_, err = Load(recipe, nil)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Load: got %v, want a recipe problem (ErrInvalid)", err)
			}
			msg := err.Error()
			for _, w := range append(tt.want, recipe+":7: lora.target_modules: for the model in "+ckpt+" (model.path): ") {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
		})
	}
}

// TestLoRAOnModelConfigIsRefused (tester4): LoRA on a new model (model.config) trained and saved an adapter whose
// random base was never saved (base_model_name_or_path null, no model.safetensors), which tune eval, tune merge
// and PEFT could not use. Load refuses it, naming lora and model.config and what to do.
func TestLoRAOnModelConfigIsRefused(t *testing.T) {
	_, err := Load("tiny.yaml", []string{"lora.target_modules=[query, value]"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "lora: trains adapters on a frozen base model, but model.config builds a new model") ||
		!strings.Contains(err.Error(), "Train LoRA on a checkpoint (model.path), or train the new model in full (remove the lora section)") {
		t.Fatalf("LoRA on model.config: %v", err)
	}
}

// TestMissingRecipeSuggestsTheClosest: a recipe file that is not there names the closest recipe in its folder,
// or the embedded recipe of that name.
func TestMissingRecipeSuggestsTheClosest(t *testing.T) {
	for _, tt := range []struct{ ref, want string }{
		{"./tny.yaml", "; did you mean ./tiny.yaml?"},
		{filepath.Join(t.TempDir(), "bert-ful.yaml"), "; did you mean the embedded recipe bert-full (tune ls)?"},
	} {
		_, err := Load(tt.ref, nil)
		if !errors.Is(err, os.ErrNotExist) || !strings.HasSuffix(err.Error(), tt.want) {
			t.Errorf("Load(%q) = %v, want it to end %q", tt.ref, err, tt.want)
		}
	}
}

// TestMissingModelPathSaysWhatToGive: a model.path that does not exist says that a directory or a Hub id of
// the Hugging Face cache goes there, and what fills the cache.
func TestMissingModelPathSaysWhatToGive(t *testing.T) {
	r := Default()
	r.Source, r.Model.Path = "r.yaml", filepath.Join(t.TempDir(), "ckpt")
	err := r.CheckFiles()
	want := "model.path: " + r.Model.Path + ": no such file or directory; set model.path to a checkpoint directory, or to a Hub id"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "tune download") {
		t.Fatalf("CheckFiles: %v\nwant %q", err, want)
	}
}

// TestTabIndentSaysSo: a recipe indented with a tab gets yaml.v3's reason and what to do.
func TestTabIndentSaysSo(t *testing.T) {
	_, err := Decode([]byte("model:\n\tpath: x\n"), "r.yaml", ".", nil)
	want := "r.yaml: not valid YAML: line 2: found character that cannot start any token; line 2 is indented with a tab"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want %q...", err, want)
	}
	if _, err := Decode([]byte("model:\n  path: x\n   bad: 1\n"), "r.yaml", ".", nil); err == nil || strings.Contains(err.Error(), "tab") {
		t.Fatalf("a bad indent of spaces: %v", err)
	}
}
