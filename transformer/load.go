package transformer

import (
	"fmt"
	"strings"

	"github.com/tune-ml/tune/loaders"
)

// LoadOptions adjust LoadPretrained, as from_pretrained's keyword arguments do.
type LoadOptions struct {
	// Labels, when non-nil, names the classes and so sets num_labels (from_pretrained(id2label=...)).
	Labels []string
	// NumLabels, when > 0 and Labels is nil, sets num_labels with transformers' default names LABEL_i
	// (from_pretrained(num_labels=...)).
	NumLabels int
	// ProblemType, when set, overrides config.problem_type (Regression, SingleLabel).
	ProblemType string
	// Seed draws the parameters the checkpoint lacks (InitWeights' normal(0, initializer_range)).
	Seed uint64
	// AttnImplementation is transformers' attn_implementation: AttnSDPA ("sdpa", the default when empty) or
	// AttnEager ("eager"); see AttnChoice.
	AttnImplementation string
}

// LoadReport is what LoadPretrained found: the checkpoint's tensors matched by name (missing, unexpected,
// mis-shaped, ignored, renamed; see loaders.LoadReport) and the parameters it initialised afresh.
type LoadReport struct {
	*loaders.LoadReport
	// Architecture is the transformers class that was built ("BertForSequenceClassification"), for messages.
	Architecture string
	// Initialized lists the head parameters (pooler, classifier) the checkpoint lacked or held with another
	// num_labels, which were freshly initialised: they must be trained before the model is useful.
	Initialized []string
}

// Notice returns transformers' warning for freshly initialised weights, or "" when every weight was loaded.
func (r *LoadReport) Notice() string {
	if len(r.Initialized) == 0 {
		return ""
	}
	return "Some weights of " + r.arch() + " were not initialized from the checkpoint and are newly " +
		"initialized: " + strings.Join(r.Initialized, ", ") + ". You should train this model on a down-stream task " +
		"before using it for predictions."
}

// UnusedNotice returns transformers' warning for checkpoint tensors the model did not use (the report's
// Unexpected, summarised by loaders.SummarizeNames), or "" when every tensor was used. dir names the checkpoint.
func (r *LoadReport) UnusedNotice(dir string) string {
	if len(r.Unexpected) == 0 {
		return ""
	}
	return fmt.Sprintf("%d tensors of the checkpoint in %s were not used by %s: %s. "+
		"If the checkpoint is meant to be exactly this model, its config.json does not describe it (num_hidden_layers, "+
		"hidden_size, ...) and the model is not the one that was trained.",
		len(r.Unexpected), dir, r.arch(), loaders.SummarizeNames(r.Unexpected, 8))
}

// arch returns the class name for messages.
func (r *LoadReport) arch() string {
	if r.Architecture == "" {
		return "the model"
	}
	return r.Architecture
}
