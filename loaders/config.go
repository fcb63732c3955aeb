package loaders

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tune-ml/tune/internal/jsonerr"
	"github.com/tune-ml/tune/internal/smallfile"
)

// ConfigName is the model configuration file of a Hugging Face checkpoint directory.
const ConfigName = "config.json"

// Problem types of transformers' sequence-classification heads (config.problem_type).
const (
	ProblemRegression                = "regression"                  // MSELoss on the logits
	ProblemSingleLabelClassification = "single_label_classification" // CrossEntropyLoss over num_labels classes
	ProblemMultiLabelClassification  = "multi_label_classification"  // BCEWithLogitsLoss, one logit per label
)

// BertConfig is a BERT-family config.json as transformers reads and writes it (transformers/models/bert/
// configuration_bert.py plus PretrainedConfig's label fields). Absent fields take transformers' defaults, which are
// bert-base-uncased's (transformers/models/bert/configuration_bert.py; see DefaultBertConfig). Fields tune does not interpret are kept in Extra and
// written back unchanged, so a config read and written again round-trips.
type BertConfig struct {
	VocabSize                 int     // vocab_size: rows of the word embeddings
	HiddenSize                int     // hidden_size: C, the model width
	NumHiddenLayers           int     // num_hidden_layers: encoder layers
	NumAttentionHeads         int     // num_attention_heads: heads per layer; C must be a multiple of it
	IntermediateSize          int     // intermediate_size: I, the feed-forward width
	HiddenAct                 string  // hidden_act: "gelu" is the exact erf GELU
	HiddenDropoutProb         float64 // hidden_dropout_prob
	AttentionProbsDropoutProb float64 // attention_probs_dropout_prob
	MaxPositionEmbeddings     int     // max_position_embeddings: longest sequence
	TypeVocabSize             int     // type_vocab_size: token-type (segment) ids
	InitializerRange          float64 // initializer_range: std of the normal weight init
	LayerNormEps              float64 // layer_norm_eps
	PadTokenID                int     // pad_token_id; -1 when config.json has null
	PositionEmbeddingType     string  // position_embedding_type ("absolute")
	// ClassifierDropout is classifier_dropout; nil (null) means the classifier uses HiddenDropoutProb.
	ClassifierDropout *float64
	// ProblemType is problem_type: "" (null: chosen from num_labels and the label dtype on the first forward),
	// or one of ProblemRegression, ProblemSingleLabelClassification, ProblemMultiLabelClassification.
	ProblemType       string
	Architectures     []string // architectures, e.g. ["BertForSequenceClassification"]
	ModelType         string   // model_type, "bert"
	TieWordEmbeddings bool     // tie_word_embeddings: an MLM decoder shares the word embeddings (default true)
	// ID2Label maps class ids 0..NumLabels()-1 to names; config.json writes the keys as strings.
	ID2Label map[int]string
	// Label2ID maps names to class ids; derived from ID2Label when absent.
	Label2ID map[string]int
	// Extra holds every config.json key tune does not interpret (transformers_version, dtype, use_cache, ...),
	// written back unchanged.
	Extra map[string]json.RawMessage

	present map[string]bool // keys that were in the file read (kept on write even at their default)
	source  string          // the file read, for error messages
}

// DefaultBertConfig returns transformers' BertConfig() defaults: bert-base-uncased with two labels LABEL_0 and
// LABEL_1, model_type "bert".
func DefaultBertConfig() *BertConfig {
	return &BertConfig{
		VocabSize: 30522, HiddenSize: 768, NumHiddenLayers: 12, NumAttentionHeads: 12, IntermediateSize: 3072,
		HiddenAct: "gelu", HiddenDropoutProb: 0.1, AttentionProbsDropoutProb: 0.1, MaxPositionEmbeddings: 512,
		TypeVocabSize: 2, InitializerRange: 0.02, LayerNormEps: 1e-12, PadTokenID: 0,
		PositionEmbeddingType: "absolute", ModelType: "bert", TieWordEmbeddings: true,
		ID2Label: defaultLabels(2), Label2ID: invertLabels(defaultLabels(2)),
		Extra: map[string]json.RawMessage{}, present: map[string]bool{},
	}
}

// defaultLabels returns transformers' default names LABEL_0 .. LABEL_{n-1}.
func defaultLabels(n int) map[int]string {
	m := make(map[int]string, n)
	for i := range n {
		m[i] = "LABEL_" + strconv.Itoa(i)
	}
	return m
}

func invertLabels(id2label map[int]string) map[string]int {
	m := make(map[string]int, len(id2label))
	for id, name := range id2label {
		m[name] = id
	}
	return m
}

// ReadBertConfig reads path (a config.json, or a directory holding one), applies transformers' defaults to absent
// fields and checks that the file is a consistent config.json: each known key has its JSON type, and the labels
// agree (Validate). It does not judge the values as a model: bert.BertConfigFromHF does. Errors name the
// file and the key.
func ReadBertConfig(path string) (*BertConfig, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, ConfigName)
	}
	data, err := smallfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("loaders: %w", err)
	}
	return ParseBertConfig(path, data)
}

// ParseBertConfig parses config.json contents; name is used in error messages. See ReadBertConfig.
func ParseBertConfig(name string, data []byte) (*BertConfig, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("loaders: %s: invalid JSON: %w", name, DescribeJSONError(data, err))
	}
	if raw == nil {
		return nil, fmt.Errorf("loaders: %s: the config is null, want a JSON object", name)
	}
	c := DefaultBertConfig()
	c.source = name
	for k := range raw {
		c.present[k] = true
	}
	d := configDecoder{raw: raw}
	d.int("vocab_size", false, &c.VocabSize)
	d.int("hidden_size", false, &c.HiddenSize)
	d.int("num_hidden_layers", false, &c.NumHiddenLayers)
	d.int("num_attention_heads", false, &c.NumAttentionHeads)
	d.int("intermediate_size", false, &c.IntermediateSize)
	d.string("hidden_act", &c.HiddenAct)
	d.float("hidden_dropout_prob", &c.HiddenDropoutProb)
	d.float("attention_probs_dropout_prob", &c.AttentionProbsDropoutProb)
	d.int("max_position_embeddings", false, &c.MaxPositionEmbeddings)
	d.int("type_vocab_size", false, &c.TypeVocabSize)
	d.float("initializer_range", &c.InitializerRange)
	d.float("layer_norm_eps", &c.LayerNormEps)
	if v, ok := raw["pad_token_id"]; ok && string(v) == "null" {
		c.PadTokenID = -1
	}
	d.int("pad_token_id", true, &c.PadTokenID)
	d.string("position_embedding_type", &c.PositionEmbeddingType)
	d.nullableFloat("classifier_dropout", &c.ClassifierDropout)
	d.nullableString("problem_type", &c.ProblemType)
	d.strings("architectures", &c.Architectures)
	d.string("model_type", &c.ModelType)
	d.bool("tie_word_embeddings", &c.TieWordEmbeddings)
	d.labels(c)
	if d.err != nil {
		return nil, fmt.Errorf("loaders: %s: %w", name, d.err)
	}
	c.Extra = raw // what is left: keys tune does not interpret
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// NumLabels returns the number of classes, len(ID2Label) (transformers' num_labels).
func (c *BertConfig) NumLabels() int { return len(c.ID2Label) }

// SetLabels names the classes 0..len(names)-1 and rebuilds ID2Label and Label2ID from them; names must be
// non-empty and distinct.
func (c *BertConfig) SetLabels(names []string) error {
	if len(names) == 0 {
		return errors.New("loaders: SetLabels: no label names")
	}
	id2label := make(map[int]string, len(names))
	label2id := make(map[string]int, len(names))
	for i, n := range names {
		if j, dup := label2id[n]; dup {
			return fmt.Errorf("loaders: SetLabels: label %q given for ids %d and %d", n, j, i)
		}
		id2label[i], label2id[n] = n, i
	}
	c.ID2Label, c.Label2ID = id2label, label2id
	return nil
}

// Validate checks what makes the config a consistent config.json, whatever model reads it: id2label names the
// ids 0..n-1 with no gap, and label2id maps names to those ids. Errors name the file and the key, as
// "loaders: config.json: id2label has 2 entries but no id 1: ids must be 0..1". Whether a model can be built
// from the values (sizes, dropout probabilities, hidden_act, pad_token_id, problem_type, at least one label)
// is the model package's decision, not the file's: bert.BertConfig.Problems checks those, for a
// checkpoint's config.json and a recipe's model.config alike.
func (c *BertConfig) Validate() error {
	src := c.source
	if src == "" {
		src = ConfigName
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("loaders: %s: %s", src, fmt.Sprintf(format, a...))
	}
	for i := range len(c.ID2Label) {
		if _, ok := c.ID2Label[i]; !ok {
			return fail("id2label has %d entries but no id %d: ids must be 0..%d", len(c.ID2Label), i, len(c.ID2Label)-1)
		}
	}
	for name, id := range c.Label2ID {
		if id < 0 || id >= len(c.ID2Label) {
			return fail("label2id maps %q to %d, outside id2label's ids 0..%d", name, id, len(c.ID2Label)-1)
		}
	}
	return nil
}

// DescribeJSONError adds to err, when it is a *json.SyntaxError in data, the line and column (1-based, in
// bytes) where the JSON breaks: "line 3 column 7: invalid character ...". A *json.UnmarshalTypeError (a value
// of the wrong JSON type, the key named unless it is the top level) is said in the file's terms instead of
// Go's, where the value ends, still wrapping
// err: `line 2 column 21: "hidden_size": want an integer, got a string`, not "cannot unmarshal string into Go
// struct field hfConfig.hidden_size of type int". Other errors are returned as they are. It is jsonerr.Describe,
// which the packages below loaders (tokenizers) use too.
func DescribeJSONError(data []byte, err error) error { return jsonerr.Describe(data, err) }
