package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestFinetuneOnMoreLabelsThanTheCheckpoint: fine-tuning a two-label checkpoint on a three-class file (string
// labels, or class ids 0..2) re-initialises the classifier with a note, as transformers' run_glue does;
// before, it failed suggesting model.config.num_labels, which is refused beside model.path. model.num_labels
// chooses the number explicitly.
func TestFinetuneOnMoreLabelsThanTheCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model; skipped in -short mode")
	}
	testutil.IsolateCache(t)
	ckpt := tinyCheckpoint(t)
	dir := t.TempDir()
	rows := []string{"a gripping film", "not good at all", "it is a film"}
	write := func(name string, labels []string) string {
		var b strings.Builder
		b.WriteString("sentence\tlabel\n")
		for i := range 12 {
			b.WriteString(rows[i%3] + "\t" + labels[i%3] + "\n")
		}
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(b.String()), 0o644)
		return p
	}
	for _, c := range []struct {
		name, data string
		extra      []string
		numLabels  int
		note       string
	}{
		{"string labels", write("s.tsv", []string{"pos", "neg", "neutral"}), nil, 3,
			`data.train ` + filepath.Join(dir, "s.tsv") + ` has 3 labels "neg", "neutral", "pos" but the checkpoint has num_labels 2`},
		{"class ids", write("i.tsv", []string{"2", "0", "1"}), nil, 3, "holds class ids up to 2 but the checkpoint has num_labels 2"},
		{"model.num_labels", write("n.tsv", []string{"1", "0", "1"}), []string{"model.num_labels=4"}, 4, "model.num_labels 4 differs from the checkpoint's num_labels 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			args := append([]string{"finetune", "--device", "cpu", filepath.Join("..", "..", "recipes", "bert-full.yaml"), "model.path=" + ckpt,
				"data.train=" + c.data, "data.eval=" + c.data, "data.max_length=32", "training.max_steps=2", "training.bf16=false",
				"training.per_device_train_batch_size=4", "training.output_dir=" + out}, c.extra...)
			code, stdout, stderr := runCLI(args...)
			if code != exitOK {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			if !strings.Contains(stderr, c.note) || !strings.Contains(stderr, "initialised afresh") {
				t.Errorf("stderr lacks %q:\n%s", c.note, stderr)
			}
			b, err := os.ReadFile(filepath.Join(out, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			var cfg struct {
				ID2Label map[string]string `json:"id2label"`
			}
			json.Unmarshal(b, &cfg)
			if len(cfg.ID2Label) != c.numLabels {
				t.Errorf("saved id2label %v, want %d classes", cfg.ID2Label, c.numLabels)
			}
		})
	}
	code, _, stderr := runCLI("validate", "--no-files", "tiny", "model.num_labels=3")
	if code != exitUsage || !strings.Contains(stderr, "model.num_labels: applies to a checkpoint (model.path); a new model takes model.config.num_labels") {
		t.Errorf("model.num_labels with model.config: exit %d %s", code, stderr)
	}
}
