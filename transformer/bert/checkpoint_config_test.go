package bert

import (
	"errors"
	"github.com/tune-ml/tune/transformer"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckpointConfigProblems: a checkpoint's config.json that loaders parses (its types and labels are
// fine) but that describes a model this package cannot build is refused by LoadPretrained before any weights
// are read, naming the file's directory, the key and the value. These rows were loaders' until the model rules
// moved here.
func TestCheckpointConfigProblems(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"hidden not a multiple of heads", `{"hidden_size":100,"num_attention_heads":12}`,
			"config.json: num_attention_heads: hidden_size 100 is not a multiple of num_attention_heads 12"},
		{"zero layers", `{"num_hidden_layers":0}`, "config.json: num_hidden_layers: must be ≥ 1 (got 0)"},
		{"dropout above 1", `{"hidden_dropout_prob":1.5}`, "config.json: hidden_dropout_prob: must be a probability in [0, 1) (got 1.5)"},
		{"classifier dropout negative", `{"classifier_dropout":-0.1}`, "config.json: classifier_dropout: must be a probability in [0, 1) (got -0.1)"},
		{"layer_norm_eps zero", `{"layer_norm_eps":0}`, "config.json: layer_norm_eps: must be a finite number > 0 (got 0)"},
		{"pad outside the vocabulary", `{"vocab_size":10,"pad_token_id":10}`, "config.json: pad_token_id: must be a token id in [0, 10) (vocab_size), or null for none (got 10)"},
		{"unknown problem type", `{"problem_type":"ranking"}`, `config.json: problem_type: must be "regression", "single_label_classification", "multi_label_classification" or null (got "ranking")`},
		{"no labels", `{"num_labels":0}`, "config.json: num_labels: must be ≥ 1 (got 0): a classifier needs at least one label"},
		{"an empty id2label", `{"id2label":{}}`, "config.json: num_labels: must be ≥ 1 (got 0)"},
		{"relu", `{"hidden_act":"relu"}`, `config.json: hidden_act: "relu" is not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(tt.json), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := LoadPretrained(dir, cpuBackend(), transformer.LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, tt.want)) {
				t.Fatalf("LoadPretrained: %v\nwant it to name %s and contain %q", err, dir, tt.want)
			}
			var p ConfigProblem
			if !errors.As(err, &p) {
				t.Errorf("%v is not a ConfigProblem to errors.As", err)
			}
		})
	}
}
