package lora

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tune-ml/tune/loaders"
)

// TestSaveWritesLabels checks that Save puts the base config, with the run's label names, beside the adapter
// and that SavedLabels reads them back (nil for an adapter without config.json, as PEFT writes them).
func TestSaveWritesLabels(t *testing.T) {
	cfg := tinyConfig()
	cfg.ID2Label = []string{"neg", "pos"}
	m, err := Apply(newBase(t, cpuBackend(), cfg, 7), seqCls(), 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	must(t, m.Save(dir))
	tests := []struct {
		name string
		dir  string
		want []string
	}{
		{"a tune adapter carries the trained label names", dir, []string{"neg", "pos"}},
		{"an adapter without config.json has none", func() string {
			d := t.TempDir()
			for _, f := range []string{AdapterConfigName, AdapterWeightsName} {
				data, err := os.ReadFile(filepath.Join(dir, f))
				must(t, err)
				must(t, os.WriteFile(filepath.Join(d, f), data, 0o644))
			}
			return d
		}(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SavedLabels(tt.dir)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("SavedLabels = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	c, err := loaders.ReadBertConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Label2ID["pos"] != 1 || c.NumLabels() != 2 || c.HiddenSize != cfg.HiddenSize {
		t.Errorf("config.json beside the adapter: label2id %v, num_labels %d, hidden_size %d", c.Label2ID, c.NumLabels(), c.HiddenSize)
	}
}
