package bert

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// ConfigProblem is one reason this package cannot build a model from a BertConfig (Problems), or cannot train
// one on labels (TrainingProblems): the config.json key to fix and what is wrong with its value. It is the one
// list of these rules; a checkpoint's config.json (BertConfigFromHF, LoadPretrained) and a recipe's
// model.config (package recipes) are both checked through it, so all three name the same key with the same
// message. As an error it reads "KEY: MSG" (ConfigFileError puts the file's path before it) and unwraps to Err.
type ConfigProblem struct {
	// Key is the config.json key to fix: "hidden_dropout_prob", "num_attention_heads", ... "num_labels" stands
	// for the number of labels, len(id2label).
	Key string
	// Msg says what is wrong and names the value: "must be a probability in [0, 1) (got 1.5)".
	Msg string
	// Err is the cause when there is a typed one (a *SizeError, ErrMultiLabel), else nil.
	Err error
}

// Error formats the problem as "KEY: MSG", the key being config.json's.
func (p ConfigProblem) Error() string { return p.Key + ": " + p.Msg }

// ConfigFileError is the problems of the config.json at Path (Err, the errors.Join of ConfigProblems that
// Validate or BertConfigFromHF returns), each line naming the file and the key:
// "ckpt/config.json: num_attention_heads: hidden_size 100 is not a multiple of num_attention_heads 12".
type ConfigFileError struct {
	Path string // the config.json
	Err  error  // its problems
}

// Error puts Path before each line of Err.
func (e *ConfigFileError) Error() string {
	lines := strings.Split(e.Err.Error(), "\n")
	for i, l := range lines {
		lines[i] = e.Path + ": " + l
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns Err.
func (e *ConfigFileError) Unwrap() error { return e.Err }

// BadInput marks the error as the input's (internal/badinput): the config.json must change (exit status 2).
func (e *ConfigFileError) BadInput() bool { return true }

// Unwrap returns Err, so that errors.As finds a *SizeError and errors.Is finds ErrMultiLabel.
func (p ConfigProblem) Unwrap() error { return p.Err }

// Problems returns every field this package cannot build a model from, in the order of the checks below, or
// nil when it can:
//   - the sizes (vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
//     max_position_embeddings, type_vocab_size, num_labels) are at least 1, and within CheckSize's limits
//     (that problem's Err is the *SizeError);
//   - hidden_size is a multiple of num_attention_heads (reported under num_attention_heads);
//   - hidden_act is "gelu" (the exact erf form) and position_embedding_type "absolute" (or empty), the only
//     ones the layers implement;
//   - hidden_dropout_prob, attention_probs_dropout_prob and classifier_dropout (when not null) are
//     probabilities in [0, 1): see dropoutRange;
//   - layer_norm_eps is finite and > 0; initializer_range is finite and ≥ 0 (torch's normal_ takes std ≥ 0,
//     and 0 is what transformers accepts too);
//   - pad_token_id is a token id in [0, vocab_size), or -1 (null: no padding index);
//   - problem_type is empty, Regression, SingleLabel or MultiLabel (as transformers' PretrainedConfig).
func (c *BertConfig) Problems() []ConfigProblem {
	var ps []ConfigProblem
	bad := func(key, format string, a ...any) {
		ps = append(ps, ConfigProblem{Key: key, Msg: fmt.Sprintf(format, a...)})
	}
	sizesOK := true
	for _, s := range c.sizes() {
		if s.v < 1 {
			sizesOK = false
			if s.key == "num_labels" {
				bad(s.key, "must be ≥ 1 (got %d): a classifier needs at least one label", s.v)
			} else {
				bad(s.key, "must be ≥ 1 (got %d)", s.v)
			}
		}
	}
	if sizesOK {
		var se *SizeError
		if err := c.CheckSize(); errors.As(err, &se) {
			ps = append(ps, ConfigProblem{Key: se.Key, Msg: se.Reason, Err: se})
		}
		if c.HiddenSize%c.NumAttentionHeads != 0 {
			bad("num_attention_heads", "hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize,
				c.NumAttentionHeads)
		}
	}
	if c.HiddenAct != "gelu" {
		bad("hidden_act", "%q is not supported: tune's BERT implements \"gelu\" (the exact erf form)", c.HiddenAct)
	}
	if c.PositionEmbeddingType != "" && c.PositionEmbeddingType != "absolute" {
		bad("position_embedding_type", "%q is not supported: tune's BERT implements \"absolute\"", c.PositionEmbeddingType)
	}
	probs := []struct {
		key string
		v   float64
	}{{"hidden_dropout_prob", c.HiddenDropoutProb}, {"attention_probs_dropout_prob", c.AttentionProbsDropoutProb}}
	if c.ClassifierDropout != nil { // null means hidden_dropout_prob, checked above
		probs = append(probs, struct {
			key string
			v   float64
		}{"classifier_dropout", *c.ClassifierDropout})
	}
	for _, p := range probs {
		if !dropoutRange(p.v) {
			bad(p.key, "must be a probability in [0, 1) (got %v)", p.v)
		}
	}
	if !(c.LayerNormEps > 0) || math.IsInf(c.LayerNormEps, 0) {
		bad("layer_norm_eps", "must be a finite number > 0 (got %v)", c.LayerNormEps)
	}
	if !(c.InitializerRange >= 0) || math.IsInf(c.InitializerRange, 0) {
		bad("initializer_range", "must be a finite number ≥ 0, the std of the weights' normal init (got %v)", c.InitializerRange)
	}
	if c.VocabSize >= 1 && (c.PadTokenID < -1 || c.PadTokenID >= c.VocabSize) {
		bad("pad_token_id", "must be a token id in [0, %d) (vocab_size), or null for none (got %d)", c.VocabSize, c.PadTokenID)
	}
	switch c.ProblemType {
	case "", Regression, SingleLabel, MultiLabel:
	default:
		bad("problem_type", "must be %q, %q, %q or null (got %q)", Regression, SingleLabel, MultiLabel, c.ProblemType)
	}
	return ps
}

// dropoutRange reports whether p is a dropout probability the layers take: p in [0, 1). transformers'
// BertConfig does not bound hidden_dropout_prob, attention_probs_dropout_prob or classifier_dropout itself (v5
// declares them `float | int` with no validator); the bound comes from the layers. torch.nn.Dropout accepts p
// in [0, 1], where p = 1 zeroes its whole input, so that branch carries nothing forward and no gradient back.
// tune's Backend.Dropout scales the kept values by 1/(1−p) and refuses p = 1 (tensor.ErrArgument), so the
// range here is [0, 1): every probability with which dropout still passes something on. NaN is outside it.
func dropoutRange(p float64) bool { return p >= 0 && p < 1 }

// TrainingProblems returns the fields that let a model be built (Problems is empty) but not trained on labels:
// problem_type MultiLabel (BCEWithLogitsLoss is not implemented; Err is ErrMultiLabel), and problem_type
// Regression with num_labels other than 1 (the MSE loss is computed on the squeezed logits). Forward with
// labels refuses the same (problemType); this reports it before any data is read. An empty problem_type is
// resolved on the first labelled Forward and is no problem here.
func (c *BertConfig) TrainingProblems() []ConfigProblem {
	switch c.ProblemType {
	case MultiLabel:
		return []ConfigProblem{{Key: "problem_type", Err: ErrMultiLabel, Msg: fmt.Sprintf("%q (BCEWithLogitsLoss) is not "+
			"supported yet; use %q (integer labels) or %q (num_labels 1)", MultiLabel, SingleLabel, Regression)}}
	case Regression:
		if p := regressionProblem(c.NumLabels()); p != nil {
			return []ConfigProblem{*p}
		}
	}
	return nil
}

// regressionProblem returns the problem of problem_type Regression with numLabels labels, or nil for 1.
func regressionProblem(numLabels int) *ConfigProblem {
	if numLabels == 1 {
		return nil
	}
	return &ConfigProblem{Key: "problem_type", Msg: fmt.Sprintf("%q needs num_labels 1 (got %d): tune computes "+
		"the MSE loss on the squeezed logits", Regression, numLabels)}
}

// Validate returns nil when this package can build a model from c, else the errors.Join of every problem
// (Problems), each a ConfigProblem naming the config.json key and its value: "hidden_dropout_prob: must be a
// probability in [0, 1) (got 1.5)". A size beyond CheckSize's limits is found
// with errors.As as a *SizeError.
func (c *BertConfig) Validate() error {
	ps := c.Problems()
	if len(ps) == 0 {
		return nil
	}
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errors.Join(errs...)
}
