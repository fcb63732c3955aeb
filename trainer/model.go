package trainer

import (
	"github.com/tune-ml/tune/transformer"
)

// Output is transformer.Output (the model API lives with the models; the Trainer only consumes it).
type Output = transformer.Output

// ForwardOptions is transformer.ForwardOptions (the model API lives with the models; the Trainer only consumes it).
type ForwardOptions = transformer.ForwardOptions

// NamedParam is transformer.NamedParam (the model API lives with the models; the Trainer only consumes it).
type NamedParam = transformer.NamedParam

// Model is transformer.Model, the one model contract (the model API lives with the models; the Trainer only
// consumes it): bert.BertForSequenceClassification, a causal LM, or either with LoRA adapters.
type Model = transformer.Model

// Loader is implemented by a Model that can read back what its Save wrote in dir into its existing parameters
// (every trainable one, bit for bit). The Trainer needs it to resume from a checkpoint and for
// load_best_model_at_end, and fails with a clear error when a model lacks it. The Trainer calls WeightsUpdated
// after a successful Load.
type Loader interface {
	// Load reads dir (a directory Save wrote) into the model's parameters; shapes and names must match.
	Load(dir string) error
}
