package bert

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/transformer"
)

// Problem types as transformers names them in config.problem_type (transformers/models/bert/modeling_bert.py).
const (
	// Regression uses MSELoss on the squeezed logits; chosen when num_labels == 1.
	Regression = "regression"
	// SingleLabel uses mean CrossEntropyLoss over integer labels; chosen when num_labels > 1.
	SingleLabel = "single_label_classification"
	// MultiLabel uses BCEWithLogitsLoss over float multi-hot labels; not supported yet.
	MultiLabel = "multi_label_classification"
)

// ErrMultiLabel is returned by Forward with labels when the problem type is multi-label classification, which
// this package does not implement yet.
var ErrMultiLabel = errors.New("transformer: multi_label_classification (BCEWithLogitsLoss) is not supported yet; " +
	"use single-label classification (integer labels) or regression (num_labels 1)")

// BertConfig is a BERT model's configuration with transformers' field meanings (BertConfig in
// transformers/models/bert/configuration_bert.py; defaults in transformers/models/bert/configuration_bert.py). It is a plain value: build it with
// DefaultBertConfig and change fields, or from a checkpoint's config.json (BertConfigFromHF).
type BertConfig struct {
	VocabSize                 int     // V, vocab_size
	HiddenSize                int     // C, hidden_size
	NumHiddenLayers           int     // L, num_hidden_layers
	NumAttentionHeads         int     // H, num_attention_heads (D = C/H)
	IntermediateSize          int     // I, intermediate_size
	HiddenAct                 string  // hidden_act: only "gelu" (exact erf form) is supported
	HiddenDropoutProb         float64 // hidden_dropout_prob
	AttentionProbsDropoutProb float64 // attention_probs_dropout_prob
	MaxPositionEmbeddings     int     // max_position_embeddings: the longest sequence T
	TypeVocabSize             int     // type_vocab_size
	InitializerRange          float64 // initializer_range: std of the normal init of transformer.Linear and Embedding weights
	LayerNormEps              float64 // layer_norm_eps
	PadTokenID                int     // pad_token_id: padding_idx of the word embeddings; -1 for none (null)
	// PositionEmbeddingType must be "absolute" (or empty, meaning absolute).
	PositionEmbeddingType string
	// ClassifierDropout is classifier_dropout; nil means hidden_dropout_prob.
	ClassifierDropout *float64
	// ID2Label names the classes, index → name; its length is num_labels (transformers derives num_labels from
	// id2label the same way).
	ID2Label []string
	// ProblemType is problem_type: "", Regression, SingleLabel or MultiLabel. Empty is resolved from NumLabels
	// on the first Forward with labels, as transformers does, and then stored here.
	ProblemType string
}

// BertConfigFromHF converts a parsed config.json (loaders.ReadBertConfig) to a BertConfig and validates it for
// this package (Validate: every key a model cannot be built from). The converted config is returned even when
// the error is not nil, so that a caller can list its Problems.
func BertConfigFromHF(h *loaders.BertConfig) (BertConfig, error) {
	c := BertConfig{
		VocabSize: h.VocabSize, HiddenSize: h.HiddenSize, NumHiddenLayers: h.NumHiddenLayers,
		NumAttentionHeads: h.NumAttentionHeads, IntermediateSize: h.IntermediateSize, HiddenAct: h.HiddenAct,
		HiddenDropoutProb: h.HiddenDropoutProb, AttentionProbsDropoutProb: h.AttentionProbsDropoutProb,
		MaxPositionEmbeddings: h.MaxPositionEmbeddings, TypeVocabSize: h.TypeVocabSize,
		InitializerRange: h.InitializerRange, LayerNormEps: h.LayerNormEps, PadTokenID: h.PadTokenID,
		PositionEmbeddingType: h.PositionEmbeddingType, ProblemType: h.ProblemType,
		ID2Label: make([]string, h.NumLabels()),
	}
	if h.ClassifierDropout != nil {
		v := *h.ClassifierDropout
		c.ClassifierDropout = &v
	}
	for i := range c.ID2Label {
		c.ID2Label[i] = h.ID2Label[i]
	}
	// Another model_type with BERT-like tensor names (roberta, distilbert, ...) differs in what the names do
	// not show (RoBERTa's position ids start after padding_idx), so it is refused rather than read as BERT.
	if h.ModelType != "" && h.ModelType != "bert" {
		return c, ConfigProblem{Key: "model_type", Msg: fmt.Sprintf("%q is not BERT's (\"bert\"), and tune reads no other "+
			"encoder; the model_types tune builds are %s", h.ModelType, strings.Join(transformer.ModelTypes(), ", "))}
	}
	return c, c.Validate()
}

// ToHF returns base (a config read from a checkpoint, whose unknown keys are kept; nil for transformers'
// defaults) updated with c, as config.json of a BertForSequenceClassification. base is not modified.
func (c *BertConfig) ToHF(base *loaders.BertConfig) (*loaders.BertConfig, error) {
	var h loaders.BertConfig
	if base != nil {
		h = *base
	} else {
		h = *loaders.DefaultBertConfig()
	}
	h.Extra = maps.Clone(h.Extra)
	h.VocabSize, h.HiddenSize, h.NumHiddenLayers = c.VocabSize, c.HiddenSize, c.NumHiddenLayers
	h.NumAttentionHeads, h.IntermediateSize, h.HiddenAct = c.NumAttentionHeads, c.IntermediateSize, c.HiddenAct
	h.HiddenDropoutProb, h.AttentionProbsDropoutProb = c.HiddenDropoutProb, c.AttentionProbsDropoutProb
	h.MaxPositionEmbeddings, h.TypeVocabSize = c.MaxPositionEmbeddings, c.TypeVocabSize
	h.InitializerRange, h.LayerNormEps, h.PadTokenID = c.InitializerRange, c.LayerNormEps, c.PadTokenID
	if c.PositionEmbeddingType != "" {
		h.PositionEmbeddingType = c.PositionEmbeddingType
	}
	h.ClassifierDropout = nil
	if c.ClassifierDropout != nil {
		v := *c.ClassifierDropout
		h.ClassifierDropout = &v
	}
	h.ProblemType = c.ProblemType
	h.ModelType = "bert"
	h.Architectures = []string{"BertForSequenceClassification"}
	same := base != nil && len(base.ID2Label) == len(c.ID2Label)
	for i, l := range c.ID2Label {
		same = same && base.ID2Label[i] == l
	}
	if !same {
		if err := h.SetLabels(c.ID2Label); err != nil {
			return nil, fmt.Errorf("transformer: config.json labels: %w", err)
		}
	}
	return &h, nil
}

// DefaultBertConfig returns transformers' BertConfig() defaults (bert-base-uncased's shape) with 2 labels.
func DefaultBertConfig() BertConfig {
	return BertConfig{
		VocabSize: 30522, HiddenSize: 768, NumHiddenLayers: 12, NumAttentionHeads: 12, IntermediateSize: 3072,
		HiddenAct: "gelu", HiddenDropoutProb: 0.1, AttentionProbsDropoutProb: 0.1, MaxPositionEmbeddings: 512,
		TypeVocabSize: 2, InitializerRange: 0.02, LayerNormEps: 1e-12, PadTokenID: 0,
		PositionEmbeddingType: "absolute", ID2Label: DefaultLabels(2),
	}
}

// DefaultLabels returns transformers' default label names "LABEL_0" … "LABEL_{n-1}".
func DefaultLabels(n int) []string {
	ls := make([]string, n)
	for i := range ls {
		ls[i] = "LABEL_" + strconv.Itoa(i)
	}
	return ls
}

// NumLabels returns num_labels, the classifier's output width L.
func (c *BertConfig) NumLabels() int { return len(c.ID2Label) }

// HeadDim returns D = hidden_size / num_attention_heads.
func (c *BertConfig) HeadDim() int { return c.HiddenSize / c.NumAttentionHeads }

// ClassifierDropoutProb returns the dropout before the classifier: classifier_dropout, or hidden_dropout_prob
// when that is null (BertForSequenceClassification).
func (c *BertConfig) ClassifierDropoutProb() float64 {
	if c.ClassifierDropout != nil {
		return *c.ClassifierDropout
	}
	return c.HiddenDropoutProb
}
