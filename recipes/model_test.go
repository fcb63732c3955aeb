package recipes

import (
	"fmt"
	"github.com/tune-ml/tune/transformer/bert"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer"
)

// scratchRecipe is a recipe building a model from model.config with the given lines under it (indented by
// four spaces, the first on line 3).
func scratchRecipe(lines ...string) string {
	return "model:\n  config:\n    " + strings.Join(lines, "\n    ") + "\ntokenizer:\n  path: v.txt\ndata:\n  train: a.tsv\n"
}

// TestConfigRulesAgree: the same bad BERT config is refused under the same key, with the same message, by the
// three ways a config reaches tune: a bert.BertConfig in Go (Validate), a checkpoint's config.json
// (bert.LoadPretrained, and a recipe's model.path through CheckFiles), and a recipe's model.config.
// The rules live in bert.BertConfig.Problems alone; the other two translate and report.
func TestConfigRulesAgree(t *testing.T) {
	tests := []struct {
		name string
		key  string
		yaml []string // lines under model.config, the key's first
		json string   // config.json
		edit func(c *bert.BertConfig)
	}{
		{"dropout 1 (tune's Dropout takes [0, 1))", "hidden_dropout_prob", []string{"hidden_dropout_prob: 1"},
			`{"hidden_dropout_prob": 1.0}`, func(c *bert.BertConfig) { c.HiddenDropoutProb = 1 }},
		{"attention dropout negative", "attention_probs_dropout_prob", []string{"attention_probs_dropout_prob: -0.1"},
			`{"attention_probs_dropout_prob": -0.1}`, func(c *bert.BertConfig) { c.AttentionProbsDropoutProb = -0.1 }},
		{"classifier_dropout above 1", "classifier_dropout", []string{"classifier_dropout: 1.5"},
			`{"classifier_dropout": 1.5}`, func(c *bert.BertConfig) { v := 1.5; c.ClassifierDropout = &v }},
		{"no layers", "num_hidden_layers", []string{"num_hidden_layers: 0"},
			`{"num_hidden_layers": 0}`, func(c *bert.BertConfig) { c.NumHiddenLayers = 0 }},
		{"heads do not divide hidden", "num_attention_heads", []string{"num_attention_heads: 5", "hidden_size: 64"},
			`{"num_attention_heads": 5, "hidden_size": 64}`, func(c *bert.BertConfig) { c.NumAttentionHeads, c.HiddenSize = 5, 64 }},
		{"relu", "hidden_act", []string{"hidden_act: relu"},
			`{"hidden_act": "relu"}`, func(c *bert.BertConfig) { c.HiddenAct = "relu" }},
		{"layer_norm_eps 0", "layer_norm_eps", []string{"layer_norm_eps: 0"},
			`{"layer_norm_eps": 0.0}`, func(c *bert.BertConfig) { c.LayerNormEps = 0 }},
		{"initializer_range negative", "initializer_range", []string{"initializer_range: -0.02"},
			`{"initializer_range": -0.02}`, func(c *bert.BertConfig) { c.InitializerRange = -0.02 }},
		{"pad_token_id outside the vocabulary", "pad_token_id", []string{"pad_token_id: 30522"},
			`{"pad_token_id": 30522}`, func(c *bert.BertConfig) { c.PadTokenID = 30522 }},
		{"no labels", "num_labels", []string{"num_labels: 0"},
			`{"num_labels": 0}`, func(c *bert.BertConfig) { c.ID2Label = nil }},
		{"unknown problem_type", "problem_type", []string{"problem_type: ranking"},
			`{"problem_type": "ranking"}`, func(c *bert.BertConfig) { c.ProblemType = "ranking" }},
		{"a vocab_size beyond 32 bits", "vocab_size", []string{"vocab_size: 3000000000"},
			`{"vocab_size": 3000000000}`, func(c *bert.BertConfig) { c.VocabSize = 3_000_000_000 }},
		{"100000 layers (too many parameters)", "num_hidden_layers", []string{"num_hidden_layers: 100000"},
			`{"num_hidden_layers": 100000}`, func(c *bert.BertConfig) { c.NumHiddenLayers = 100_000 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The rule, from transformer: exactly one problem, under tt.key.
			cfg := bert.DefaultBertConfig()
			tt.edit(&cfg)
			ps := cfg.Problems()
			if len(ps) != 1 || ps[0].Key != tt.key {
				t.Fatalf("transformer: Problems = %+v, want one for %s", ps, tt.key)
			}
			want := tt.key + ": " + ps[0].Msg
			if err := cfg.Validate(); err == nil || err.Error() != want {
				t.Errorf("transformer: Validate = %v, want %q", err, want)
			}

			dir := t.TempDir()
			config := filepath.Join(dir, "config.json")
			if err := os.WriteFile(config, []byte(tt.json), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, _, err := bert.LoadPretrained(dir, cpu.New(), transformer.LoadOptions{}); err == nil ||
				err.Error() != config+": "+want {
				t.Errorf("config.json: LoadPretrained: %v\nwant %q", err, config+": "+want)
			}
			r := Default()
			r.Source, r.Model.Path = "r.yaml", dir
			if err := r.CheckFiles(); err == nil ||
				!strings.Contains(err.Error(), "model.path: "+config+": "+want) {
				t.Errorf("config.json: CheckFiles: %v\nwant %q", err, "model.path: "+config+": "+want)
			}

			_, err := decode(scratchRecipe(tt.yaml...))
			if err == nil || !strings.Contains(err.Error(), "r.yaml:3: model.config."+want) {
				t.Errorf("model.config: %v\nwant %q", err, "r.yaml:3: model.config."+want)
			}
			if n := strings.Count(err.Error(), "model.config."); n != 1 {
				t.Errorf("model.config: %d problems reported, want 1:\n%v", n, err)
			}
		})
	}
}

// TestModelConfigValidConfigs: valid model.config blocks build the bert.BertConfig the fields say, the
// same one a checkpoint's config.json with those values gives, and no problem.
func TestModelConfigValidConfigs(t *testing.T) {
	half := 0.5
	tests := []struct {
		name string
		edit func(c *ModelConfig)
		want func(c *bert.BertConfig)
	}{
		{"the defaults are bert-base's", func(*ModelConfig) {}, func(*bert.BertConfig) {}},
		{"a small model with three labels and a classifier dropout", func(c *ModelConfig) {
			c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 100, 64, 2, 4, 128
			c.NumLabels, c.ClassifierDropout, c.HiddenDropoutProb = 3, &half, 0
		}, func(c *bert.BertConfig) {
			c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 100, 64, 2, 4, 128
			c.ID2Label, c.ClassifierDropout, c.HiddenDropoutProb = bert.DefaultLabels(3), &half, 0
		}},
		{"regression", func(c *ModelConfig) { c.NumLabels, c.ProblemType = 1, "regression" },
			func(c *bert.BertConfig) {
				c.ID2Label, c.ProblemType = bert.DefaultLabels(1), bert.Regression
			}},
		{"initializer_range 0 (zero init; torch and transformers allow it)", func(c *ModelConfig) { c.InitializerRange = 0 },
			func(c *bert.BertConfig) { c.InitializerRange = 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := DefaultModelConfig()
			tt.edit(&mc)
			var problems []string
			mc.validate(func(key, format string, a ...any) { problems = append(problems, key) })
			if len(problems) != 0 {
				t.Fatalf("problems with %v", problems)
			}
			got, err := mc.bertConfig()
			if err != nil {
				t.Fatal(err)
			}
			want := bert.DefaultBertConfig()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("bertConfig =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// TestModelConfigRecipeRules: what only a recipe can get wrong (a negative or huge num_labels, a float that
// config.json cannot hold) is reported by recipes under its key, and the model's checks still report every
// other key once; a problem_type the trainer cannot train is refused before any data is read.
func TestModelConfigRecipeRules(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(c *ModelConfig)
		wants []string // key: message, in order
	}{
		{"negative num_labels and a bad dropout", func(c *ModelConfig) { c.NumLabels, c.HiddenDropoutProb = -3, 2 },
			[]string{"num_labels: -3 is negative: num_labels is the number of classes",
				"hidden_dropout_prob: must be a probability in [0, 1) (got 2)"}},
		{"two million labels", func(c *ModelConfig) { c.NumLabels = 2_000_000 },
			[]string{"num_labels: 2000000 is more than tune's limit of 100000 classes"}},
		{"NaN and Inf", func(c *ModelConfig) {
			inf := math.Inf(1)
			c.LayerNormEps, c.ClassifierDropout, c.HiddenAct = math.NaN(), &inf, "tanh"
		}, []string{"layer_norm_eps: must be a finite number (got NaN)", "classifier_dropout: must be a finite number (got +Inf)",
			`hidden_act: "tanh" is not supported: tune's BERT implements "gelu" (the exact erf form)`}},
		{"regression with three labels", func(c *ModelConfig) { c.NumLabels, c.ProblemType = 3, "regression" },
			[]string{`problem_type: "regression" needs num_labels 1 (got 3): tune computes the MSE loss on the squeezed logits`}},
		{"multi-label", func(c *ModelConfig) { c.ProblemType = "multi_label_classification" },
			[]string{`problem_type: "multi_label_classification" (BCEWithLogitsLoss) is not supported yet; use "single_label_classification" (integer labels) or "regression" (num_labels 1)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := DefaultModelConfig()
			tt.edit(&mc)
			var got []string
			mc.validate(func(key, format string, a ...any) {
				got = append(got, key+": "+fmt.Sprintf(format, a...))
			})
			if !reflect.DeepEqual(got, tt.wants) {
				t.Errorf("problems\n%q\nwant\n%q", got, tt.wants)
			}
		})
	}
}
