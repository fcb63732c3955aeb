package recipes

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tune-ml/tune/transformer"
)

// ModelConfig is a recipe's model.config: block, a new BERT for sequence classification built from scratch.
// Its keys are transformers' BertConfig names, and ConfigJSON writes it as the config.json transformers reads,
// so the model package decodes it exactly as it decodes a checkpoint's config.
type ModelConfig struct {
	// VocabSize is V, the word embedding's rows (30522 in bert-base); every tokenizer id must be below it.
	VocabSize int `yaml:"vocab_size" json:"vocab_size"`
	// HiddenSize is C, the width of every hidden state (768); a multiple of num_attention_heads.
	HiddenSize int `yaml:"hidden_size" json:"hidden_size"`
	// NumHiddenLayers is L, the encoder layers (12).
	NumHiddenLayers int `yaml:"num_hidden_layers" json:"num_hidden_layers"`
	// NumAttentionHeads is H (12); each head has D = C/H dimensions.
	NumAttentionHeads int `yaml:"num_attention_heads" json:"num_attention_heads"`
	// IntermediateSize is I, the feed-forward width (3072, 4·C).
	IntermediateSize int `yaml:"intermediate_size" json:"intermediate_size"`
	// HiddenAct is the feed-forward activation; only "gelu" (the exact erf form) is implemented.
	HiddenAct string `yaml:"hidden_act" json:"hidden_act"`
	// HiddenDropoutProb is the dropout after the embeddings and each sublayer's output projection, in [0, 1)
	// (0.1).
	HiddenDropoutProb float64 `yaml:"hidden_dropout_prob" json:"hidden_dropout_prob"`
	// AttentionProbsDropoutProb is the dropout on the attention probabilities softmax(QKᵀ/√D), in [0, 1) (0.1).
	AttentionProbsDropoutProb float64 `yaml:"attention_probs_dropout_prob" json:"attention_probs_dropout_prob"`
	// MaxPositionEmbeddings is the longest sequence T the position embeddings cover (512).
	MaxPositionEmbeddings int `yaml:"max_position_embeddings" json:"max_position_embeddings"`
	// TypeVocabSize is the number of token_type_ids values (2: first and second segment).
	TypeVocabSize int `yaml:"type_vocab_size" json:"type_vocab_size"`
	// InitializerRange is the standard deviation of the normal init of Linear and Embedding weights (0.02).
	InitializerRange float64 `yaml:"initializer_range" json:"initializer_range"`
	// LayerNormEps is the ε LayerNorm adds to the variance (1e-12).
	LayerNormEps float64 `yaml:"layer_norm_eps" json:"layer_norm_eps"`
	// PadTokenID is the word embeddings' padding_idx, a token id in [0, vocab_size) (0).
	PadTokenID int `yaml:"pad_token_id" json:"pad_token_id"`
	// ClassifierDropout is the dropout before the classifier; nil means hidden_dropout_prob.
	ClassifierDropout *float64 `yaml:"classifier_dropout" json:"classifier_dropout"`
	// NumLabels is the number of classes; 1 means regression (MSE loss), as in transformers.
	NumLabels int `yaml:"num_labels" json:"-"`
	// ProblemType is transformers' problem_type: "" (from num_labels), single_label_classification or
	// regression.
	ProblemType string `yaml:"problem_type,omitempty" json:"problem_type,omitempty"`
}

// DefaultModelConfig returns transformers' BertConfig() defaults (bert-base, FACTS §4.1) with 2 labels.
func DefaultModelConfig() ModelConfig {
	return ModelConfig{
		VocabSize: 30522, HiddenSize: 768, NumHiddenLayers: 12, NumAttentionHeads: 12, IntermediateSize: 3072,
		HiddenAct: "gelu", HiddenDropoutProb: 0.1, AttentionProbsDropoutProb: 0.1, MaxPositionEmbeddings: 512,
		TypeVocabSize: 2, InitializerRange: 0.02, LayerNormEps: 1e-12, PadTokenID: 0, NumLabels: 2,
	}
}

// ConfigJSON returns c as a transformers config.json for BertForSequenceClassification: the BertConfig fields,
// model_type "bert", architectures, and id2label/label2id with num_labels entries (LABEL_0, ...).
func (c *ModelConfig) ConfigJSON() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("recipes: encoding model.config: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("recipes: encoding model.config: %w", err)
	}
	id2label, label2id := map[string]string{}, map[string]int{}
	for i := range c.NumLabels {
		name := fmt.Sprintf("LABEL_%d", i)
		id2label[fmt.Sprint(i)], label2id[name] = name, i
	}
	m["model_type"] = "bert"
	m["architectures"] = []string{"BertForSequenceClassification"}
	m["id2label"], m["label2id"] = id2label, label2id
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("recipes: encoding model.config: %w", err)
	}
	return append(out, '\n'), nil
}

// validate reports each bad field through bad(key, format, args...), keys relative to model.config.
func (c *ModelConfig) validate(bad func(key, format string, a ...any)) {
	for _, f := range []struct {
		key string
		v   int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads}, {"intermediate_size", c.IntermediateSize},
		{"max_position_embeddings", c.MaxPositionEmbeddings}, {"type_vocab_size", c.TypeVocabSize},
		{"num_labels", c.NumLabels},
	} {
		if f.v < 1 {
			bad(f.key, "must be ≥ 1 (got %d)", f.v)
		}
	}
	c.validateSize(bad)
	if c.NumAttentionHeads > 0 && c.HiddenSize%c.NumAttentionHeads != 0 {
		bad("num_attention_heads", "hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize,
			c.NumAttentionHeads)
	}
	if c.HiddenAct != "gelu" {
		bad("hidden_act", "tune's BERT implements gelu (the exact erf form); got %q", c.HiddenAct)
	}
	probs := []struct {
		key string
		v   float64
	}{{"hidden_dropout_prob", c.HiddenDropoutProb}, {"attention_probs_dropout_prob", c.AttentionProbsDropoutProb}}
	if c.ClassifierDropout != nil {
		probs = append(probs, struct {
			key string
			v   float64
		}{"classifier_dropout", *c.ClassifierDropout})
	}
	for _, p := range probs {
		if !(p.v >= 0 && p.v < 1) {
			bad(p.key, "must be in [0, 1) (got %v)", p.v)
		}
	}
	if !(c.InitializerRange > 0) {
		bad("initializer_range", "must be > 0 (got %v)", c.InitializerRange)
	}
	if !(c.LayerNormEps > 0) {
		bad("layer_norm_eps", "must be > 0 (got %v)", c.LayerNormEps)
	}
	if c.PadTokenID < 0 || c.PadTokenID >= c.VocabSize {
		bad("pad_token_id", "must be a token id in [0, vocab_size) (got %d)", c.PadTokenID)
	}
	switch c.ProblemType {
	case "", "single_label_classification":
	case "regression":
		if c.NumLabels != 1 {
			bad("problem_type", "regression needs num_labels 1 (got %d)", c.NumLabels)
		}
	default:
		bad("problem_type", "must be single_label_classification or regression (got %q)", c.ProblemType)
	}
}

// maxNumLabels bounds num_labels: config.json lists every label in id2label and label2id, and the largest
// classification label sets in use (extreme multi-label benchmarks aside) have some 10^4 classes.
const maxNumLabels = 1_000_000

// validateSize reports sizes the model cannot be built with (transformer.BertConfig.CheckSize: a size beyond
// 32 bits, or a model beyond transformer.MaxParameters), under the key to fix, so that a typo such as
// vocab_size: 3000000000 is an error here rather than the Go runtime's fatal "out of memory" when the model is
// allocated. Sizes below 1 are reported by validate itself.
func (c *ModelConfig) validateSize(bad func(key, format string, a ...any)) {
	if min(c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize,
		c.MaxPositionEmbeddings, c.TypeVocabSize, c.NumLabels) < 1 {
		return
	}
	if c.NumLabels > maxNumLabels {
		bad("num_labels", "%d is more than tune's limit of %d classes", c.NumLabels, maxNumLabels)
		return
	}
	sizes := transformer.BertConfig{
		VocabSize: c.VocabSize, HiddenSize: c.HiddenSize, NumHiddenLayers: c.NumHiddenLayers,
		NumAttentionHeads: c.NumAttentionHeads, IntermediateSize: c.IntermediateSize,
		MaxPositionEmbeddings: c.MaxPositionEmbeddings, TypeVocabSize: c.TypeVocabSize,
		ID2Label: make([]string, c.NumLabels),
	}
	var se *transformer.SizeError
	if err := sizes.CheckSize(); errors.As(err, &se) {
		bad(se.Key, "%s", se.Reason)
	} else if err != nil {
		bad("", "%v", err)
	}
}
