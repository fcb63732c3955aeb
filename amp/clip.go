package amp

import (
	"fmt"
	"math"

	"github.com/tune-ml/tune/tensor"
)

// clipEps is the epsilon torch.nn.utils.clip_grad_norm_ adds to the total norm before dividing.
const clipEps = 1e-6

// ClipGradNorm scales grads in place so that their global L2 norm is at most maxNorm, with
// torch.nn.utils.clip_grad_norm_'s semantics (norm_type 2, torch/amp/grad_scaler.py): the total norm is the L2 norm of the
// per-tensor norms, i.e. sqrt(Σ over every element of every gradient of g²) (Backend.GlobalNorm), and every
// gradient is multiplied by clamp(maxNorm/(total + 1e-6), max=1), computed in FP32 in the same order as PyTorch
// (reciprocal, then times maxNorm). It returns the total norm before clipping (what HF logs as grad_norm).
//
// Under FP16 loss scaling call it after GradScaler.Unscale, so it sees and reports the true gradients (clipping after unscale_, torch/amp/grad_scaler.py). A non-finite total norm (inf/NaN gradients) leaves the gradients untouched and is returned as is: the
// GradScaler skips that step anyway, and PyTorch's multiplication by 0 or NaN would only erase the evidence.
// A factor of exactly 1 is not applied (multiplying by 1 is exact, so the result is the same).
//
// grads may be F32, F16 or BF16 (nil entries are skipped). maxNorm must be positive and finite; HF's Trainer
// clips only when max_grad_norm > 0, so the caller checks that before calling.
func ClipGradNorm(b tensor.Backend, grads []*tensor.Tensor, maxNorm float64) (totalNorm float64, err error) {
	if !(maxNorm > 0) || math.IsInf(maxNorm, 0) {
		return 0, fmt.Errorf("amp: ClipGradNorm: max_norm %v must be positive and finite (set max_grad_norm ≤ 0 to disable clipping)", maxNorm)
	}
	live := liveGrads(grads)
	if len(live) == 0 {
		return 0, nil
	}
	total, err := b.GlobalNorm(live)
	if err != nil {
		return 0, fmt.Errorf("amp: ClipGradNorm: %w", err)
	}
	if math.IsNaN(total) || math.IsInf(total, 0) {
		return total, nil
	}
	// PyTorch: clip_coef = max_norm / (total_norm + 1e-6) on an FP32 tensor, which Tensor.__rdiv__ evaluates as
	// reciprocal(total_norm + 1e-6) * max_norm, each step rounded to FP32.
	coef := (1 / (float32(total) + clipEps)) * float32(maxNorm)
	if coef >= 1 {
		return total, nil
	}
	for _, g := range live {
		if err := b.Scale(g, coef); err != nil {
			return total, fmt.Errorf("amp: ClipGradNorm: %w", err)
		}
	}
	return total, nil
}

// ClipGradNormOnDevice is ClipGradNorm without the host waiting for the norm: the total norm is written into
// norm (an I64 (1) tensor holding the float64's bits, Backend.GlobalNormTo) and the gradients are scaled by
// the same FP32 coefficient on the device (Backend.ClipByNorm), so the gradients and the norm are bit for bit
// ClipGradNorm's. A non-finite norm leaves the gradients untouched and sets nonFinite (I32 (1), optional) to
// 1, which AdamWArgs.Skip reads: the step is then not taken, decided on the device. maxNorm 0 computes the
// norm and the flag only (max_grad_norm ≤ 0 disables clipping in Hugging Face's Trainer); a negative or
// non-finite maxNorm is an error.
func ClipGradNormOnDevice(b tensor.Backend, grads []*tensor.Tensor, maxNorm float64, norm, nonFinite *tensor.Tensor) error {
	if !(maxNorm >= 0) || math.IsInf(maxNorm, 0) {
		return fmt.Errorf("amp: ClipGradNormOnDevice: max_norm %v must be finite and ≥ 0 (0 computes the norm without clipping)", maxNorm)
	}
	live := liveGrads(grads)
	if err := b.GlobalNormTo(norm, live); err != nil {
		return fmt.Errorf("amp: ClipGradNormOnDevice: %w", err)
	}
	if err := b.ClipByNorm(live, norm, float32(maxNorm), nonFinite); err != nil {
		return fmt.Errorf("amp: ClipGradNormOnDevice: %w", err)
	}
	return nil
}

// GradNormOnDevice is ClipGradNormOnDevice with the clip left to AdamW: the total norm is written into norm
// (Backend.GlobalNormTo) and a non-finite one sets nonFinite (I32 (1), optional: Backend.ClipByNorm of no
// tensors), but the gradients are not changed. An AdamW step given norm and max_norm (tensor.AdamWArgs.GradNorm
// and MaxGradNorm) multiplies them by ClipByNorm's coefficient as it reads them, so the weights it leaves are
// bit for bit those of ClipGradNormOnDevice followed by AdamW, without the pass that writes the clipped
// gradients back. Nothing waits.
func GradNormOnDevice(b tensor.Backend, grads []*tensor.Tensor, norm, nonFinite *tensor.Tensor) error {
	if err := b.GlobalNormTo(norm, liveGrads(grads)); err != nil {
		return fmt.Errorf("amp: GradNormOnDevice: %w", err)
	}
	if nonFinite == nil {
		return nil
	}
	if err := b.ClipByNorm(nil, norm, 0, nonFinite); err != nil {
		return fmt.Errorf("amp: GradNormOnDevice: %w", err)
	}
	return nil
}

// liveGrads returns the non-nil gradients of grads (frozen parameters have none).
func liveGrads(grads []*tensor.Tensor) []*tensor.Tensor {
	live := make([]*tensor.Tensor, 0, len(grads))
	for _, g := range grads {
		if g != nil {
			live = append(live, g)
		}
	}
	return live
}
