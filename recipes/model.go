package recipes

import (
	"encoding/json"
	"fmt"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/bert"
	"math"

	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/loaders"
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
	// PadTokenID is the word embeddings' padding_idx, a token id in [0, vocab_size) (0), or -1 for none.
	PadTokenID int `yaml:"pad_token_id" json:"pad_token_id"`
	// ClassifierDropout is the dropout before the classifier; nil means hidden_dropout_prob.
	ClassifierDropout *float64 `yaml:"classifier_dropout" json:"classifier_dropout"`
	// NumLabels is the number of classes; 1 means regression (MSE loss), as in transformers.
	NumLabels int `yaml:"num_labels" json:"-"`
	// ProblemType is transformers' problem_type: "" (from num_labels), single_label_classification or
	// regression.
	ProblemType string `yaml:"problem_type,omitempty" json:"problem_type,omitempty"`
}

// DefaultModelConfig returns transformers' BertConfig() defaults (bert-base, transformers/models/bert/configuration_bert.py) with 2 labels.
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

// bertConfig translates model.config into the bert.BertConfig the model is built from, the way a
// checkpoint's config.json is read: ConfigJSON, parsed by loaders.ParseBertConfig, converted by
// bert.BertConfigFromHF. It does not judge the values: validate reports their Problems, and
// bert.NewBertForSequenceClassification refuses them.
func (c *ModelConfig) bertConfig() (bert.BertConfig, error) {
	data, err := c.ConfigJSON()
	if err != nil {
		return bert.BertConfig{}, err
	}
	hf, err := loaders.ParseBertConfig("model.config", data)
	if err != nil {
		return bert.BertConfig{}, errctx.Wrap("recipes: model.config", err)
	}
	cfg, _ := bert.BertConfigFromHF(hf) // its Validate error is the callers' to report, key by key
	return cfg, nil
}

// maxNumLabels bounds num_labels: config.json lists every label in id2label and label2id, and the largest
// classification label sets in use (extreme multi-label benchmarks aside) have some 10^4 classes. Validating
// model.config writes and parses that config.json, which at 10^6 labels took 12 s and 1.3 GB of allocations
// (FuzzDecodeRecipe's worker died on it); at 10^5 it is a tenth of that.
const maxNumLabels = loaders.MaxLabels

// validate reports each problem of model.config through bad(key, format, args...), keys relative to
// model.config. The rules are the model's, not the recipe's (STYLE: configs never reach into layers): the
// config bertConfig builds is checked by bert.BertConfig.Problems, as a checkpoint's config.json is, and
// by TrainingProblems, since a recipe trains. Recipes adds only what writing this block as a config.json needs:
// num_labels is a count of at most maxNumLabels (ConfigJSON names every label), and the floats are finite
// (JSON has no NaN or Inf). A field refused for that is replaced by its default before the model's checks, so
// that those still report every other key, and none twice.
func (c *ModelConfig) validate(bad func(key, format string, a ...any)) {
	enc, def := *c, DefaultModelConfig()
	switch {
	case c.NumLabels < 0:
		bad("num_labels", "%d is negative: num_labels is the number of classes", c.NumLabels)
		enc.NumLabels = def.NumLabels
	case c.NumLabels > maxNumLabels:
		bad("num_labels", "%d is more than tune's limit of %d classes", c.NumLabels, maxNumLabels)
		enc.NumLabels = def.NumLabels
	}
	var classifierDropout float64
	if c.ClassifierDropout != nil {
		classifierDropout = *c.ClassifierDropout
		enc.ClassifierDropout = &classifierDropout
	}
	for _, f := range []struct {
		key    string
		v, def *float64
	}{
		{"hidden_dropout_prob", &enc.HiddenDropoutProb, &def.HiddenDropoutProb},
		{"attention_probs_dropout_prob", &enc.AttentionProbsDropoutProb, &def.AttentionProbsDropoutProb},
		{"initializer_range", &enc.InitializerRange, &def.InitializerRange},
		{"layer_norm_eps", &enc.LayerNormEps, &def.LayerNormEps},
		{"classifier_dropout", &classifierDropout, &def.HiddenDropoutProb},
	} {
		if math.IsNaN(*f.v) || math.IsInf(*f.v, 0) {
			bad(f.key, "must be a finite number (got %v)", *f.v)
			*f.v = *f.def
		}
	}
	cfg, err := enc.bertConfig()
	if err != nil {
		bad("", "%v", err)
		return
	}
	problems := append(cfg.Problems(), cfg.TrainingProblems()...)
	for _, p := range problems {
		bad(p.Key, "%s", p.Msg)
	}
	// Within BERT's parameter limit a recipe can still ask for millions of tiny layers: every layer is built as
	// its own tensors, and a LoRA recipe is checked on the model's skeleton before anything loads, so 50,000,000
	// layers of hidden_size 4 (6.8e9 parameters) took tune validate to 4.4 GB and an out-of-memory crash.
	if len(problems) == 0 && c.NumHiddenLayers > transformer.MaxConfigLayers {
		bad("num_hidden_layers", "%d is more than %d: the deepest Transformer trained (DeepNet, Wang et al. 2022) has "+
			"1,000 layers, BERT-large 24", c.NumHiddenLayers, transformer.MaxConfigLayers)
	}
}
