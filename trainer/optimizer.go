package trainer

import (
	"fmt"

	"github.com/tune-ml/tune/tensor"
)

// AdamW is torch.optim.AdamW with decoupled weight decay (transformers/training_args.py, _single_tensor_adam) over a model's flat
// trainable buffer: one Backend.AdamW call updates every trainable parameter, with weight decay only on the
// segments Model.Trainable flags as decaying (HF's decay group; biases and LayerNorm weights are excluded,
// get_decay_parameter_names in transformers' trainer.py). The moments exp_avg and exp_avg_sq are FP32 buffers of the same length as the parameters.
type AdamW struct {
	b                tensor.Backend
	params, grads    *tensor.Tensor // (P) F32, the model's
	segs             []tensor.Segment
	expAvg, expAvgSq *tensor.Tensor // (P) F32, owned
	// Beta1, Beta2, Eps and WeightDecay are adam_beta1, adam_beta2, adam_epsilon and weight_decay.
	Beta1, Beta2, Eps, WeightDecay float64
	step                           int            // optimizer steps taken (PyTorch's per-parameter "step")
	skip                           *tensor.Tensor // the device flag of the step in progress (StepUnless)
	clip                           DeviceClip     // the clip of the step in progress (StepUnless)
}

// DeviceClip is the gradient clip a step without host waits leaves to AdamW (tensor.AdamWArgs.GradNorm):
// Norm is the step's gradient norm on the device (GlobalNormTo's I64 (1) bits, amp.GradNormOnDevice) and
// MaxNorm max_grad_norm (0: no clipping); AdamW multiplies the gradients by clip_grad_norm_'s coefficient
// as it reads them, bit for bit as after amp.ClipGradNormOnDevice, and leaves them unchanged. The zero value
// clips nothing (the gradients were clipped in memory, or are not to be clipped).
type DeviceClip struct {
	Norm    *tensor.Tensor // the step's gradient norm on the device (I64 (1) float64 bits); nil: no clip
	MaxNorm float64        // max_grad_norm; 0 clips nothing
}

// args sets the clip's fields of a.
func (c DeviceClip) args(a tensor.AdamWArgs) tensor.AdamWArgs {
	if c.Norm != nil {
		a.GradNorm, a.MaxGradNorm = c.Norm, float32(c.MaxNorm)
	}
	return a
}

// NewAdamW returns an AdamW over m's trainable parameters with zeroed moments. It errors when m has no
// trainable parameter, when its buffers are not F32 or differ in length, or when the moments cannot be
// allocated.
func NewAdamW(m Model, beta1, beta2, eps, weightDecay float64) (*AdamW, error) {
	params, grads, segs := m.Trainable()
	if params == nil || grads == nil || params.Numel() == 0 {
		return nil, fmt.Errorf("trainer: the model has no trainable parameters (is everything frozen?)")
	}
	if params.DType != tensor.F32 || grads.DType != tensor.F32 || params.Numel() != grads.Numel() {
		return nil, fmt.Errorf("trainer: trainable buffers must be F32 of equal length, got params %v and grads %v", params, grads)
	}
	b := m.Backend()
	o := &AdamW{b: b, params: params, grads: grads, segs: segs, Beta1: beta1, Beta2: beta2, Eps: eps, WeightDecay: weightDecay}
	var err error
	if o.expAvg, err = b.Alloc(tensor.F32, params.Numel()); err != nil {
		return nil, fmt.Errorf("trainer: AdamW exp_avg: %w", err)
	}
	if o.expAvgSq, err = b.Alloc(tensor.F32, params.Numel()); err != nil {
		b.Free(o.expAvg)
		return nil, fmt.Errorf("trainer: AdamW exp_avg_sq: %w", err)
	}
	return o, nil
}

// Steps returns the number of optimizer steps taken (skipped FP16 steps are not counted).
func (o *AdamW) Steps() int { return o.step }

// Step applies one update with learning rate lr to every trainable parameter from the gradients currently
// accumulated (the caller unscales and clips them first).
func (o *AdamW) Step(lr float64) error {
	o.step++
	err := o.b.AdamW(o.clip.args(tensor.AdamWArgs{
		Params: o.params, Grads: o.grads, ExpAvg: o.expAvg, ExpAvgSq: o.expAvgSq, Segments: o.segs,
		LR: float32(lr), Beta1: float32(o.Beta1), Beta2: float32(o.Beta2), Eps: float32(o.Eps),
		WeightDecay: float32(o.WeightDecay), Step: o.step, Skip: o.skip,
	}))
	if err != nil {
		o.step--
		return fmt.Errorf("trainer: AdamW step %d: %w", o.step+1, err)
	}
	return nil
}

// StepUnless is Step with the decision to skip left to the device: when skip (I32 (1), the flag
// amp.ClipGradNormOnDevice sets for a non-finite gradient norm) is non-zero there, the update changes nothing.
// The step is counted either way: the host does not know, so the caller reads the flag before it relies on
// Steps (a set flag ends training with an error). clip, when set, clips the gradients as AdamW reads them.
func (o *AdamW) StepUnless(lr float64, skip *tensor.Tensor, clip DeviceClip) error {
	o.skip, o.clip = skip, clip
	defer func() { o.skip, o.clip = nil, DeviceClip{} }()
	return o.Step(lr)
}

// StepUnlessFrom is StepUnless with the step's lr and bias corrections read on the device from row *row of
// table (tensor.AdamWArgs.Table/Row) instead of passed as kernel arguments — the caller wrote NextScalars
// there before the step — so that a CUDA graph of the step launches the same arguments every step. The
// update is bit for bit StepUnless's; the step is counted the same way.
func (o *AdamW) StepUnlessFrom(table, row, skip *tensor.Tensor, clip DeviceClip) error {
	o.step++
	err := o.b.AdamW(clip.args(tensor.AdamWArgs{
		Params: o.params, Grads: o.grads, ExpAvg: o.expAvg, ExpAvgSq: o.expAvgSq, Segments: o.segs,
		Beta1: float32(o.Beta1), Beta2: float32(o.Beta2), Eps: float32(o.Eps), WeightDecay: float32(o.WeightDecay),
		Skip: skip, Table: table, Row: row,
	}))
	if err != nil {
		o.step--
		return fmt.Errorf("trainer: AdamW step %d: %w", o.step+1, err)
	}
	return nil
}

// NextScalars returns the table row (tensor.AdamWScalars) of the next step at learning rate lr.
func (o *AdamW) NextScalars(lr float64) [3]float32 {
	return tensor.AdamWScalars(float32(lr), float32(o.Beta1), float32(o.Beta2), float32(o.WeightDecay), o.step+1)
}

// StepOnDevice is Step with the step's lr and t taken on the device from row *row of table (tensor.AdamWArgs
// Table/Row, rows made by tensor.AdamWScalars) and skipped when *skip is set: nothing of the step is known to
// the host, so Steps does not count it; the caller calls countStep for each step it learns was taken. clip,
// when set, clips the gradients as AdamW reads them.
func (o *AdamW) StepOnDevice(skip, table, row *tensor.Tensor, clip DeviceClip) error {
	err := o.b.AdamW(clip.args(tensor.AdamWArgs{
		Params: o.params, Grads: o.grads, ExpAvg: o.expAvg, ExpAvgSq: o.expAvgSq, Segments: o.segs,
		Beta1: float32(o.Beta1), Beta2: float32(o.Beta2), Eps: float32(o.Eps), WeightDecay: float32(o.WeightDecay),
		Skip: skip, Table: table, Row: row,
	}))
	if err != nil {
		return fmt.Errorf("trainer: AdamW step: %w", err)
	}
	return nil
}

// countStep counts a step StepOnDevice took (the host read that it was not skipped).
func (o *AdamW) countStep() { o.step++ }

// AdamWState is the optimizer's checkpoint: PyTorch's state ("step", "exp_avg", "exp_avg_sq") for the flat
// buffer and the hyper-parameters of its param group.
type AdamWState struct {
	Step                           int       // optimizer steps taken (PyTorch's "step"; GradScaler-skipped ones not)
	ExpAvg, ExpAvgSq               []float32 // (P) first and second moments m and v, P the trainable parameters
	Beta1, Beta2, Eps, WeightDecay float64   // the param group's betas, eps and weight_decay
}

// State downloads the optimizer state to the host.
func (o *AdamW) State() (AdamWState, error) {
	st := AdamWState{Step: o.step, Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps, WeightDecay: o.WeightDecay,
		ExpAvg: make([]float32, o.expAvg.Numel()), ExpAvgSq: make([]float32, o.expAvgSq.Numel())}
	if err := o.b.Download(st.ExpAvg, o.expAvg); err != nil {
		return st, fmt.Errorf("trainer: AdamW state: %w", err)
	}
	if err := o.b.Download(st.ExpAvgSq, o.expAvgSq); err != nil {
		return st, fmt.Errorf("trainer: AdamW state: %w", err)
	}
	return st, nil
}

// LoadState restores step and moments from st. The hyper-parameters stay those of the resumed run's arguments,
// as in transformers. It errors when the moments' length differs from the model's trainable buffer (the
// checkpoint was written for another model or another set of trainable parameters).
func (o *AdamW) LoadState(st AdamWState) error {
	if len(st.ExpAvg) != o.params.Numel() || len(st.ExpAvgSq) != o.params.Numel() {
		return fmt.Errorf("trainer: optimizer state holds %d/%d values but the model has %d trainable values: the checkpoint belongs to another model or LoRA configuration",
			len(st.ExpAvg), len(st.ExpAvgSq), o.params.Numel())
	}
	if st.Step < 0 {
		return fmt.Errorf("trainer: optimizer state: step %d must be >= 0", st.Step)
	}
	if err := o.b.Upload(o.expAvg, st.ExpAvg); err != nil {
		return fmt.Errorf("trainer: optimizer state: %w", err)
	}
	if err := o.b.Upload(o.expAvgSq, st.ExpAvgSq); err != nil {
		return fmt.Errorf("trainer: optimizer state: %w", err)
	}
	o.step = st.Step
	return nil
}

// Free releases the moment buffers.
func (o *AdamW) Free() {
	o.b.Free(o.expAvg)
	o.b.Free(o.expAvgSq)
}
