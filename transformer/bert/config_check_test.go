package bert

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// problemKeys returns the keys of ps in order.
func problemKeys(ps []ConfigProblem) []string {
	keys := make([]string, len(ps))
	for i, p := range ps {
		keys[i] = p.Key
	}
	return keys
}

// TestProblems: each rule reports its key and a message naming the value; valid configs have none.
func TestProblems(t *testing.T) {
	half := 0.5
	tests := []struct {
		name string
		edit func(c *BertConfig)
		key  string // "" means valid
		msg  string // the whole message after "KEY: "
	}{
		{"bert-base", func(*BertConfig) {}, "", ""},
		{"bert-large", func(c *BertConfig) {
			c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 1024, 24, 16, 4096
		}, "", ""},
		{"dropout 0 and just below 1", func(c *BertConfig) { c.HiddenDropoutProb, c.AttentionProbsDropoutProb = 0, 0.999 }, "", ""},
		{"classifier_dropout set", func(c *BertConfig) { c.ClassifierDropout = &half }, "", ""},
		{"initializer_range 0 (zero init, as torch allows)", func(c *BertConfig) { c.InitializerRange = 0 }, "", ""},
		{"pad_token_id null", func(c *BertConfig) { c.PadTokenID = -1 }, "", ""},
		{"empty position_embedding_type means absolute", func(c *BertConfig) { c.PositionEmbeddingType = "" }, "", ""},
		{"one label (regression)", func(c *BertConfig) { c.ID2Label = DefaultLabels(1) }, "", ""},
		{"zero layers", func(c *BertConfig) { c.NumHiddenLayers = 0 }, "num_hidden_layers", "must be ≥ 1 (got 0)"},
		{"negative vocab_size", func(c *BertConfig) { c.VocabSize = -5 }, "vocab_size", "must be ≥ 1 (got -5)"},
		{"no labels", func(c *BertConfig) { c.ID2Label = nil }, "num_labels",
			"must be ≥ 1 (got 0): a classifier needs at least one label"},
		{"size beyond 32 bits", func(c *BertConfig) { c.VocabSize = 3_000_000_000 }, "vocab_size",
			"3000000000 is more than 2147483647 (sizes are 32-bit in the kernels)"},
		{"hidden not a multiple of heads", func(c *BertConfig) { c.HiddenSize = 100 }, "num_attention_heads",
			"hidden_size 100 is not a multiple of num_attention_heads 12"},
		{"relu", func(c *BertConfig) { c.HiddenAct = "relu" }, "hidden_act",
			`"relu" is not supported: tune's BERT implements "gelu" (the exact erf form)`},
		{"relative positions", func(c *BertConfig) { c.PositionEmbeddingType = "relative_key" }, "position_embedding_type",
			`"relative_key" is not supported: tune's BERT implements "absolute"`},
		{"dropout 1 (torch allows it, tune's Dropout does not)", func(c *BertConfig) { c.HiddenDropoutProb = 1 },
			"hidden_dropout_prob", "must be a probability in [0, 1) (got 1)"},
		{"attention dropout negative", func(c *BertConfig) { c.AttentionProbsDropoutProb = -0.1 },
			"attention_probs_dropout_prob", "must be a probability in [0, 1) (got -0.1)"},
		{"dropout NaN", func(c *BertConfig) { c.HiddenDropoutProb = math.NaN() }, "hidden_dropout_prob",
			"must be a probability in [0, 1) (got NaN)"},
		{"classifier_dropout above 1", func(c *BertConfig) { v := 1.5; c.ClassifierDropout = &v }, "classifier_dropout",
			"must be a probability in [0, 1) (got 1.5)"},
		{"layer_norm_eps 0", func(c *BertConfig) { c.LayerNormEps = 0 }, "layer_norm_eps", "must be a finite number > 0 (got 0)"},
		{"layer_norm_eps infinite", func(c *BertConfig) { c.LayerNormEps = math.Inf(1) }, "layer_norm_eps",
			"must be a finite number > 0 (got +Inf)"},
		{"initializer_range negative", func(c *BertConfig) { c.InitializerRange = -0.02 }, "initializer_range",
			"must be a finite number ≥ 0, the std of the weights' normal init (got -0.02)"},
		{"pad_token_id outside the vocabulary", func(c *BertConfig) { c.VocabSize, c.PadTokenID = 10, 10 }, "pad_token_id",
			"must be a token id in [0, 10) (vocab_size), or null for none (got 10)"},
		{"pad_token_id below -1", func(c *BertConfig) { c.PadTokenID = -2 }, "pad_token_id",
			"must be a token id in [0, 30522) (vocab_size), or null for none (got -2)"},
		{"unknown problem_type", func(c *BertConfig) { c.ProblemType = "ranking" }, "problem_type",
			`must be "regression", "single_label_classification", "multi_label_classification" or null (got "ranking")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultBertConfig()
			tt.edit(&c)
			ps := c.Problems()
			err := c.Validate()
			if tt.key == "" {
				if len(ps) != 0 || err != nil {
					t.Fatalf("Problems = %v, Validate = %v, want none", ps, err)
				}
				return
			}
			if len(ps) != 1 || ps[0].Key != tt.key || ps[0].Msg != tt.msg {
				t.Fatalf("Problems = %+v, want one for %s: %q", ps, tt.key, tt.msg)
			}
			want := tt.key + ": " + tt.msg
			if err == nil || err.Error() != want {
				t.Errorf("Validate = %v, want %q", err, want)
			}
		})
	}
}

// TestProblemsReportsEveryKey: one config with many mistakes gets one problem per key, in the order of the
// checks, and Validate joins them all; a size problem is still a *SizeError to errors.As.
func TestProblemsReportsEveryKey(t *testing.T) {
	c := DefaultBertConfig()
	c.VocabSize, c.HiddenSize, c.HiddenAct = 3_000_000_000, 100, "relu"
	c.HiddenDropoutProb, c.LayerNormEps, c.ProblemType = 1.5, -1, "ranking"
	want := []string{"vocab_size", "num_attention_heads", "hidden_act", "hidden_dropout_prob", "layer_norm_eps", "problem_type"}
	ps := c.Problems()
	if got := problemKeys(ps); !slices.Equal(got, want) {
		t.Fatalf("keys = %v, want %v", got, want)
	}
	err := c.Validate()
	var se *SizeError
	if !errors.As(err, &se) || se.Key != "vocab_size" {
		t.Errorf("Validate: %v, want a *SizeError for vocab_size in it", err)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(want) || strings.Contains(err.Error(), "transformer:") {
		t.Errorf("Validate names %d problems, want %d, each without a package prefix:\n%v", n, len(want), err)
	}
	// In a file, each line names the file and the key.
	fe := (&ConfigFileError{Path: "ckpt/config.json", Err: err}).Error()
	for i, line := range strings.Split(fe, "\n") {
		if !strings.HasPrefix(line, "ckpt/config.json: "+want[i]+": ") {
			t.Errorf("line %d %q does not start with the file and %s", i, line, want[i])
		}
	}
	t.Run("sizes below 1 skip the checks that divide by them", func(t *testing.T) {
		c := DefaultBertConfig()
		c.NumAttentionHeads, c.VocabSize = 0, 0
		if got := problemKeys(c.Problems()); !slices.Equal(got, []string{"vocab_size", "num_attention_heads"}) {
			t.Errorf("keys = %v, want vocab_size and num_attention_heads only", got)
		}
	})
}

// TestTrainingProblems: configs a model can be built from but not trained on, reported before any data.
func TestTrainingProblems(t *testing.T) {
	tests := []struct {
		name    string
		problem string
		labels  int
		want    string // "" means trainable
		is      error
	}{
		{"resolved on the first batch", "", 3, "", nil},
		{"single-label", SingleLabel, 3, "", nil},
		{"regression with one label", Regression, 1, "", nil},
		{"regression with three labels", Regression, 3, `"regression" needs num_labels 1 (got 3)`, nil},
		{"multi-label", MultiLabel, 3, `"multi_label_classification" (BCEWithLogitsLoss) is not supported yet`, ErrMultiLabel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultBertConfig()
			c.ProblemType, c.ID2Label = tt.problem, DefaultLabels(tt.labels)
			if ps := c.Problems(); len(ps) != 0 {
				t.Fatalf("Problems = %v: the model can be built", ps)
			}
			ps := c.TrainingProblems()
			if tt.want == "" {
				if len(ps) != 0 {
					t.Fatalf("TrainingProblems = %v, want none", ps)
				}
				return
			}
			if len(ps) != 1 || ps[0].Key != "problem_type" || !strings.Contains(ps[0].Msg, tt.want) {
				t.Fatalf("TrainingProblems = %+v, want problem_type: %q", ps, tt.want)
			}
			if tt.is != nil && !errors.Is(ps[0], tt.is) {
				t.Errorf("%v is not %v", ps[0], tt.is)
			}
		})
	}
}
