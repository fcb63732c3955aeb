package recipes

import (
	"strings"
	"testing"
)

// TestOverrideRemovesKey: `tune finetune recipes/bert.yaml lora=null` (or torchtune's ~lora) trains in full,
// as the recipe without its lora: section would; before, lora=null gave an empty section (PEFT's defaults),
// silently keeping LoRA on. A null or ~ leaf falls back to its default; a typo is caught with the closest key.
func TestOverrideRemovesKey(t *testing.T) {
	bert, err := Lookup("bert")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, override string
		check          func(r *Recipe) bool
		wantErr        string
	}{
		{"lora=null", "lora=null", func(r *Recipe) bool { return r.LoRA == nil }, ""},
		{"lora=~", "lora=~", func(r *Recipe) bool { return r.LoRA == nil }, ""},
		{"~lora", "~lora", func(r *Recipe) bool { return r.LoRA == nil }, ""},
		{"a leaf back to its default", "training.learning_rate=null", func(r *Recipe) bool { return r.Training.LearningRate == 5e-5 }, ""},
		{"~ of a nested key", "~lora.modules_to_save", func(r *Recipe) bool { return r.LoRA != nil && r.LoRA.R == 8 }, ""},
		{"a key the recipe does not set", "~training.max_steps", func(r *Recipe) bool { return r.Training.MaxSteps == -1 }, ""},
		{"a typo", "~lroa", nil, "unknown key 'lroa' at the top level; did you mean 'lora'?"},
		{"a typo below", "training.lerning_rate=null", nil, "unknown key 'lerning_rate' in training; did you mean 'learning_rate'?"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Decode(bert, "embedded:bert", ".", []string{c.override})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(r) {
				t.Errorf("%s: lora %+v, training %+v", c.override, r.LoRA, r.Training)
			}
		})
	}
}
