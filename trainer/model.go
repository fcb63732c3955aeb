package trainer

import (
	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// Output is what a model's Forward returns to the host.
type Output struct {
	Logits    []float32 // (B, NumLabels), FP32 whatever the autocast dtype
	NumLabels int
	// Loss is the mean loss over the batch's labelled rows (cross-entropy or MSE), FP32 and unscaled; NaN when
	// the batch has no labels.
	Loss float32
}

// ForwardOptions control one Forward call.
type ForwardOptions struct {
	// Train keeps the activations Backward needs and applies dropout.
	Train bool
	// Seed and Offset place this call in the Philox stream for dropout (tensor.PhiloxKeep); the model advances
	// its own offset from Offset for each dropout site. The trainer gives each micro-batch a disjoint range, so a
	// resumed run draws the same masks.
	Seed, Offset uint64
}

// NamedParam is one parameter as Hugging Face names it ("bert.encoder.layer.0.attention.self.query.weight").
type NamedParam struct {
	Name      string
	Value     *tensor.Tensor // FP32 master weight
	Grad      *tensor.Tensor // FP32 gradient; nil for a frozen parameter
	Trainable bool
	Decay     bool // weight decay applies (false for biases and LayerNorm weights, as HF's Trainer decides)
}

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
	Load(dir string) error
}
