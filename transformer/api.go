package transformer

import (
	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// Model is the one contract every model family implements (BERT's sequence classifier, the causal language
// models) and that the trainer trains and package lora adapts. A batch's labels are (B) class ids for a
// classifier or (B, T) token ids for a causal LM (shifted inside the model, as transformers does); −100 is
// ignored. The model reports how many labels a batch supervises (Supervised), so the trainer normalises an
// accumulation window's loss by its supervised examples or tokens.
type Model interface {
	// Backend returns the backend the model's tensors live on.
	Backend() tensor.Backend
	// SetPolicy sets the autocast policy for the following Forward and Backward calls.
	SetPolicy(p amp.Policy)
	// Forward runs the model on b. With opts.Train it keeps activations for Backward; with opts.HostLogits it
	// copies the logits to the host (Output.Logits), else they stay on the device.
	Forward(b *loaders.Batch, opts ForwardOptions) (Output, error)
	// Supervised returns the number of labels of b that enter the loss: labelled rows (label ≠ −100) for a
	// classifier, every row for regression, next-token targets (labels[:, 1:] ≠ −100) for a causal LM. Output.Loss
	// is the batch's summed loss divided by it.
	Supervised(b *loaders.Batch) int
	// Backward back-propagates the last training Forward with d(objective)/d(mean loss) = seed (the loss scale
	// times this micro-batch's share of the accumulation window's supervised labels), accumulating (+=) into the
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

// Adaptable is a Model whose projections can be listed and replaced by module path and whose parameters can be
// frozen by name, each change re-packing the flat parameter buffers: what package lora adapts.
type Adaptable interface {
	Model
	// Projections lists every projection with its full module path, in model order.
	Projections() []ModuleProjection
	// ReplaceProjections puts each projection of repl in place of the module at its path and re-packs.
	ReplaceProjections(repl map[string]Projection) error
	// SetTrainable sets each parameter's trainability from its full name and re-packs.
	SetTrainable(keep func(name string) bool) error
	FrozenStorage
}

// FrozenStorage is implemented by a model that can store its frozen projection weights once in the autocast
// dtype instead of keeping FP32 masters cast every step (ModelCore.StoreFrozenIn, which every family embeds).
// The trainer calls StoreFrozenIn(policy dtype) before training under FP16/BF16 autocast.
type FrozenStorage interface {
	// StoreFrozenIn stores every frozen projection weight and bias in dt (F16, BF16, or F32 to widen them back).
	StoreFrozenIn(dt tensor.DType) error
	// FrozenDType returns the dtype frozen projection weights are stored in.
	FrozenDType() tensor.DType
}

// GradientCheckpointer is a Model that can trade compute for activation memory as transformers'
// gradient_checkpointing_enable() does: its Forward keeps only each layer's input and its Backward recomputes
// each layer's forward from it, with results bit for bit those without it.
type GradientCheckpointer interface {
	// SetGradientCheckpointing turns recomputation on or off for the following training passes.
	SetGradientCheckpointing(on bool)
	// GradientCheckpointing reports whether it is on.
	GradientCheckpointing() bool
}

// Output is what a model's Forward returns.
type Output struct {
	// Logits is the host copy of the logits in FP32 whatever the autocast dtype, filled only when
	// ForwardOptions.HostLogits is set: (B, L) for a classifier, (B, T, V) for a causal LM.
	Logits []float32
	// Device holds the logits on the device in the pass's GEMM dtype when the model keeps them all ((B, L) for a
	// classifier); nil for a causal LM in training, whose head runs chunk by chunk. It is a view of the step
	// arena, valid until the next Forward.
	Device *tensor.Tensor
	// NumLabels is the number of logits per row (a classifier's num_labels, 1 for regression) or per token (a
	// causal LM's vocabulary size).
	NumLabels int
	// Loss is the batch's loss summed over its supervised labels and divided by their count (Model.Supervised),
	// FP32 and unscaled; NaN when the batch has no labels or none is supervised.
	Loss float32
	// LossRows, set instead of Loss (NaN then) by a model that honours ForwardOptions.DeferLoss, holds the
	// batch's per-row losses on the device (F32, a view of the step arena valid until the next Forward), and
	// LossCount the divisor: the loss is LossOf(rows, LossCount) of their host copy, bit for bit Loss. The
	// host need not wait for them until it reads them.
	LossRows  *tensor.Tensor
	LossCount int
	// Targets and Correct count, for a causal LM given labels, the supervised next-token targets and those
	// its arg-max logit predicts (TRL's mean_token_accuracy of the batch is Correct/Targets); 0 otherwise.
	Targets, Correct int
}

// ForwardOptions control one Forward call.
type ForwardOptions struct {
	// Train keeps the activations Backward needs and applies dropout.
	Train bool
	// HostLogits copies the logits to the host into Output.Logits (evaluation metrics, predictions, tests).
	HostLogits bool
	// Seed and Offset place this call in the Philox stream for dropout (tensor.PhiloxKeep); the model advances
	// its own offset from Offset for each dropout site. The trainer gives each micro-batch a disjoint range, so a
	// resumed run draws the same masks.
	Seed, Offset uint64
	// ReuseWeightCasts lets an autocast Forward use the half-precision weight copies an earlier Forward cast,
	// instead of casting every FP32 master weight again. Without it (the default) every Forward under an
	// enabled policy re-casts, so a weight changed by any means since (editing a Param's Value, Load, LoRA
	// Merge, an optimizer step) is what the pass computes with, as PyTorch's per-forward autocast cache
	// guarantees. Set it only when no master weight can have changed since the last Forward: the trainer sets
	// it for micro-batches 2..N of one accumulation window and for evaluation batches after the first, where no
	// user code runs in between. The pass's Backward always uses the copies its Forward used.
	ReuseWeightCasts bool
	// BackwardSeed, when non-zero in a training Forward, is the seed the following Backward will be called
	// with. A causal LM's head then back-propagates each chunk of logits right after computing its loss —
	// d(logits), the input gradient and the weight gradient (accumulated into the head's FP32 gradient during
	// Forward) — instead of recomputing the logits in Backward (a fused linear cross-entropy, as Liger-Kernel's
	// and Wijmans et al. 2024, "Cut Your Losses in Large-Vocabulary Language Models"): one logits GEMM and
	// one pass over them fewer per chunk. Loss and gradients are bit for bit those without it; Backward must
	// then be called with exactly this seed (it errors otherwise) before the next Forward. The trainer sets it
	// (seed = loss scale × the micro-batch's share of the window's labels); other models ignore it.
	BackwardSeed float32
	// DeferLoss asks the model to leave the loss on the device (Output.LossRows and LossCount instead of
	// Output.Loss), so that a training step need not wait for the device; a model that cannot fills Loss as
	// usual and leaves LossRows nil.
	DeferLoss bool
	// LossScale, when set in a training Forward, is an F32 (1) tensor on the device holding the loss scale
	// (amp.DeviceScaler.Scale, FP16 loss scaling without host waits): the gradient of the loss is then seeded
	// with seed·LossScale, the product formed on the device in FP32, where seed is what Backward gets (and
	// BackwardSeed) — the micro-batch's share of the window alone. For a power-of-two scale (every scale of
	// PyTorch's default growth and backoff factors) the gradients are bit for bit those of a Backward seeded
	// with the scaled seed on the host. Every model honours it.
	LossScale *tensor.Tensor
	// Observe, when set, is called with every module's output in Forward and with the gradient of the
	// objective with respect to that output in Backward (in execution order: Backward visits the modules in
	// reverse). Debugging tools use it (tune debug nan and compare); training leaves it nil.
	Observe Observer
}

// Observer receives one tensor of a pass: module is the Hugging Face module path ("bert.embeddings",
// "bert.encoder.layer.3", "bert.pooler", "classifier"); grad is false for the module's output in Forward and
// true for the gradient with respect to that output in Backward. t is a view of the model's pass buffers,
// valid only during the call: read it (Backend.Download), never keep or modify it. Its dtype is the one the
// module's last op produced under the pass's policy (F32 after LayerNorm, the GEMM dtype after a projection).
// A non-nil error stops the pass and is returned by Forward or Backward.
type Observer func(module string, grad bool, t *tensor.Tensor) error

// NamedParam is one parameter as Hugging Face names it ("bert.encoder.layer.0.attention.self.query.weight").
type NamedParam struct {
	Name      string         // the full Hugging Face name, as in model.safetensors
	Value     *tensor.Tensor // FP32 master weight
	Grad      *tensor.Tensor // FP32 gradient; nil for a frozen parameter
	Trainable bool           // it has a gradient and AdamW state (SetTrainable)
	Decay     bool           // weight decay applies (false for biases and LayerNorm weights, as HF's Trainer decides)
}

// LossOf is a batch's mean loss from its per-row losses and the count of supervised rows (Output.LossRows,
// LossCount): Σ_i rows[i] in float64, in row order, divided by count and rounded to FP32 (NaN for count 0,
// as PyTorch's mean over no element).
func LossOf(rows []float32, count int) float32 {
	var sum float64
	for _, l := range rows {
		sum += float64(l)
	}
	return float32(sum / float64(count))
}
