package trainer

import (
	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// Output is transformer.Output (the model API lives with the models; the Trainer only consumes it).
type Output = transformer.Output

// ForwardOptions is transformer.ForwardOptions (the model API lives with the models; the Trainer only consumes it).
type ForwardOptions = transformer.ForwardOptions

// NamedParam is transformer.NamedParam (the model API lives with the models; the Trainer only consumes it).
type NamedParam = transformer.NamedParam

// Model is what the Trainer trains: transformer.BertForSequenceClassification, or the same with LoRA adapters.
type Model interface {
	// Backend returns the backend the model's tensors live on.
	Backend() tensor.Backend
	// SetPolicy sets the autocast policy for the following Forward and Backward calls.
	SetPolicy(p amp.Policy)
	// Forward runs the model on b. With opts.Train it keeps activations for Backward.
	Forward(b *loaders.Batch, opts ForwardOptions) (Output, error)
	// Backward back-propagates the last training Forward with d(objective)/d(mean loss) = seed (the loss scale
	// times this micro-batch's share of the accumulation window's labelled rows), accumulating (+=) into the
	// FP32 gradient of every trainable parameter. Frozen parameters get no gradient.
	Backward(seed float32) error
	// Trainable returns the flat FP32 buffers holding every trainable parameter and its gradient (equal length)
	// and the segments with their weight-decay flags, for one fused AdamW step.
	Trainable() (params, grads *tensor.Tensor, segs []tensor.Segment)
	// ZeroGrad sets every trainable gradient to 0.
	ZeroGrad() error
	// WeightsUpdated invalidates the per-step weight-cast cache after the optimizer changed the master weights.
	WeightsUpdated()
	// NamedParameters lists all parameters in Hugging Face order and naming.
	NamedParameters() []NamedParam
	// Save writes what a checkpoint of this model holds into dir (config.json + model.safetensors for a full
	// model, adapter_config.json + adapter_model.safetensors for LoRA).
	Save(dir string) error
}

// Loader is implemented by a Model that can read back what its Save wrote in dir into its existing parameters
// (every trainable one, bit for bit). The Trainer needs it to resume from a checkpoint and for
// load_best_model_at_end, and fails with a clear error when a model lacks it. The Trainer calls WeightsUpdated
// after a successful Load.
type Loader interface {
	// Load reads dir (a directory Save wrote) into the model's parameters; shapes and names must match.
	Load(dir string) error
}
