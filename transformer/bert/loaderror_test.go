package bert

import (
	"github.com/tune-ml/tune/transformer"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
)

// TestLoadPretrainedErrorIsCompact checks LoadPretrained's error for a config.json that does not describe its
// weights: the first mis-shaped tensors one per line, each once, then a count; missing tensors summarised by
// module; a few lines in all, however many tensors disagree.
func TestLoadPretrainedErrorIsCompact(t *testing.T) {
	b := cpuBackend()
	cfg := tinyConfig()
	dir := t.TempDir()
	if err := newTestModel(t, b, cfg, 3).Save(dir); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		edit  func(c *loaders.BertConfig)
		want  []string
		lines int // at most
	}{
		{"another hidden_size: every tensor mis-shaped", func(c *loaders.BertConfig) { c.HiddenSize, c.NumAttentionHeads = cfg.HiddenSize/2, 2 },
			[]string{"tensor shapes differ from the model's (", "\n  bert.embeddings.word_embeddings.weight: checkpoint [", "\n  and ", " more\n",
				"the model's shapes come from " + filepath.Join(dir, "config.json")}, 8},
		{"more layers than the checkpoint holds", func(c *loaders.BertConfig) { c.NumHiddenLayers = cfg.NumHiddenLayers + 2 },
			[]string{"config.json has num_hidden_layers 4 but the checkpoint", "holds 2 layers (bert.encoder.layer.0 to bert.encoder.layer.1)"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edited := t.TempDir()
			weights, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(edited, "model.safetensors"), weights, 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := loaders.ReadBertConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			tt.edit(c)
			if err := c.WriteFile(filepath.Join(edited, "config.json")); err != nil {
				t.Fatal(err)
			}
			_, _, err = LoadPretrained(edited, b, transformer.LoadOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			msg := strings.ReplaceAll(err.Error(), edited, dir)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
			if n := strings.Count(msg, "\n") + 1; n > tt.lines {
				t.Errorf("error has %d lines, want at most %d:\n%s", n, tt.lines, msg)
			}
			if strings.Count(msg, "bert.embeddings.word_embeddings.weight") > 1 {
				t.Errorf("a tensor is named twice:\n%s", msg)
			}
		})
	}
}
