package transformer

import "github.com/tune-ml/tune/tensor"

// Output is what a model's Forward returns to the host.
type Output struct {
	Logits    []float32 // (B, NumLabels), FP32 whatever the autocast dtype
	NumLabels int       // L, logits per row: the config's num_labels (1 for regression)
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
	Name      string         // the full Hugging Face name, as in model.safetensors
	Value     *tensor.Tensor // FP32 master weight
	Grad      *tensor.Tensor // FP32 gradient; nil for a frozen parameter
	Trainable bool           // it has a gradient and AdamW state (SetTrainable)
	Decay     bool           // weight decay applies (false for biases and LayerNorm weights, as HF's Trainer decides)
}
