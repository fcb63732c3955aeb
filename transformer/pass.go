package transformer

import (
	"fmt"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
)

// Pass carries what every layer needs during one forward and the matching backward: the backend, the autocast
// policy with its per-step weight-cast cache, whether this is a training pass (dropout on, activations kept),
// and the Philox dropout stream. Modules that replace a projection (package lora) receive the same Pass.
type Pass struct {
	// Backend runs every op.
	Backend tensor.Backend
	// Policy is the autocast setting: GEMM-class ops in Policy.GemmDType(), LayerNorm/softmax/losses in F32.
	Policy amp.Policy
	// Cache holds the half copies of the FP32 master weights under an enabled Policy (nil under FP32).
	Cache *amp.WeightCache
	// Train applies dropout and keeps activations for Backward.
	Train bool
	// Seed is the Philox key of this pass's dropout masks.
	Seed uint64
	// Offset is the next unused Philox counter; DropoutOffset hands out ranges of it in call order.
	Offset uint64
	// Observe is ForwardOptions.Observe (nil: nothing is observed).
	Observe Observer
	// LossScale is ForwardOptions.LossScale: when set, the loss backward multiplies its seed by this F32 (1)
	// value on the device (the scaleBy of the loss backward ops).
	LossScale *tensor.Tensor
}

// observe hands t, the output of module (or, with grad, the gradient with respect to it), to the pass's
// Observer, if any.
func (p *Pass) observe(module string, grad bool, t *tensor.Tensor) error {
	if p.Observe == nil {
		return nil
	}
	if err := p.Observe(module, grad, t); err != nil {
		return fmt.Errorf("transformer: observing %s: %w", module, err)
	}
	return nil
}

// GemmDType returns the dtype GEMM-class ops take and return in this pass: F32, or F16/BF16 under autocast.
func (p *Pass) GemmDType() tensor.DType { return p.Policy.GemmDType() }

// Weight returns w (an F32 master weight or bias) as a GEMM-class op reads it: w itself under FP32, else its
// half copy from the weight-cast cache (cast at most once per optimizer step, cached_cast in
// aten/src/ATen/autocast_mode.cpp). A frozen weight stored in the autocast dtype (ModelCore.StoreFrozenIn) is
// returned as it is; one stored in half under FP32 or the other half dtype is an error (its FP32 value is gone:
// the model must be reloaded to run that way).
func (p *Pass) Weight(w *tensor.Tensor) (*tensor.Tensor, error) {
	if w == nil {
		return nil, nil
	}
	switch {
	case w.DType == p.GemmDType():
		return w, nil
	case w.DType != tensor.F32:
		return nil, fmt.Errorf("transformer: a frozen weight %v is stored in %v (StoreFrozenIn, set for training under "+
			"autocast) and cannot run under %s: reload the model from its checkpoint", w.Shape, w.DType, p.Policy.Precision())
	}
	return p.Cache.Get(w)
}

// DropoutActive reports whether a dropout of probability prob draws a mask in this pass (training and prob > 0);
// when it does not, the layer uses its input unchanged, as nn.Dropout does in eval mode.
func (p *Pass) DropoutActive(prob float32) bool { return p.Train && prob > 0 }

// DropoutOffset reserves the Philox counters a dropout mask of n elements draws (tensor.PhiloxCounters) and
// returns the first one; the layer keeps it to regenerate the same mask in Backward.
func (p *Pass) DropoutOffset(n int) uint64 {
	off := p.Offset
	p.Offset += tensor.PhiloxCounters(n)
	return off
}

// Dropout applies dropout of probability prob to x into out (which may be x) and returns the Philox offset it
// used. It must only be called when DropoutActive(prob).
func (p *Pass) Dropout(out, x *tensor.Tensor, prob float32) (uint64, error) {
	off := p.DropoutOffset(x.Numel())
	return off, p.Backend.Dropout(out, x, prob, p.Seed, off)
}

// castOrAlias casts src into dst and returns dst, or returns src itself when dst is nil (the layout gave no
// separate buffer because no cast is needed under this policy).
func castOrAlias(b tensor.Backend, dst, src *tensor.Tensor) (*tensor.Tensor, error) {
	if dst == nil {
		return src, nil
	}
	return dst, b.Cast(dst, src)
}

// takeIfCast returns a new arena view of dtype dt and the given shape when dt differs from have, and nil when
// it does not (the caller then aliases the existing F32 buffer: see castOrAlias).
func takeIfCast(a *Arena, dt, have tensor.DType, shape ...int) *tensor.Tensor {
	if dt == have {
		return nil
	}
	return a.Take(dt, shape...)
}
