package amp

import (
	"errors"
	"fmt"
	"math"

	"github.com/tune-ml/tune/tensor"
)

// Errors callers branch on with errors.Is.
var (
	// ErrHalfGradients is returned when a gradient handed to GradScaler is F16 or BF16. Trainable parameters
	// must be F32 master weights (their gradients are accumulated in F32); only frozen weights may be half.
	ErrHalfGradients = errors.New("half-precision gradients")
	// ErrScalerOrder is returned when GradScaler's calls come in the wrong order (unscale twice, step twice,
	// update before any unscale or step).
	ErrScalerOrder = errors.New("GradScaler calls out of order")
)

// MinScale is the smallest loss scale a GradScaler holds: 2^-126, the smallest normal FP32 number (FLT_MIN).
// PyTorch's _amp_update_scale_ multiplies by backoff_factor without a floor, so after about 165 consecutive
// overflowing steps from the default 2^16 its scale is an FP32 subnormal, whose reciprocal (the inv_scale of
// unscale_) is inf in FP32, and then 0, after which every gradient unscales to inf or NaN and a saved state dict
// holds scale 0. tune's Update stops the backoff at MinScale instead, whose reciprocal 2^126 is finite; above
// the floor tune and PyTorch give the same scale bit for bit. The trainer stops a run long before the floor is
// reached (max_consecutive_skipped_steps), so MinScale only guards custom options and long skip runs.
const MinScale = 0x1p-126

// GradScalerOptions are GradScaler's constructor arguments, with PyTorch's names and meaning
// (torch.amp.GradScaler). Start from DefaultGradScalerOptions.
type GradScalerOptions struct {
	InitScale      float64 // init_scale: the first loss scale (rounded to FP32)
	GrowthFactor   float64 // growth_factor: multiplies the scale after GrowthInterval clean steps; must be > 1
	BackoffFactor  float64 // backoff_factor: multiplies the scale on a step with inf/NaN gradients; must be in (0, 1)
	GrowthInterval int     // growth_interval: clean steps between growths; must be ≥ 1
	Enabled        bool    // enabled: false makes every method a no-op with scale 1
}

// DefaultGradScalerOptions returns PyTorch's defaults: init_scale 65536 (2^16), growth_factor 2, backoff_factor
// 0.5, growth_interval 2000, enabled (torch/amp/grad_scaler.py).
func DefaultGradScalerOptions() GradScalerOptions {
	return GradScalerOptions{InitScale: 65536, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000, Enabled: true}
}

// stage is PyTorch's OptState for the single optimizer a GradScaler serves.
type stage uint8

const (
	ready    stage = iota // READY: nothing done since the last Update
	unscaled              // UNSCALED: Unscale ran; gradients are true gradients
	stepped               // STEPPED: Step ran (the optimizer stepped or the step was skipped)
)

// GradScaler is dynamic loss scaling for FP16 mixed precision with torch.amp.GradScaler's exact semantics
// (torch/amp/grad_scaler.py, torch/amp/grad_scaler.py and _amp_update_scale_ in aten/src/ATen/native/cuda/AmpKernels.cu).
//
// One optimizer step, whatever the number of micro-batches, is:
//
//	for each micro-batch: seed the loss gradient with s.Scale() (e.g. CrossEntropyBackward scale = Scale()/n/N)
//	s.Unscale(grads)                      // once: grads /= scale, with a fused inf/NaN check
//	amp.ClipGradNorm(b, grads, maxNorm)   // optional, always after Unscale, so it sees true gradients
//	skipped, err := s.Step(opt.Step)      // runs opt.Step only if every gradient was finite
//	s.Update()                            // backs off on inf/NaN, grows after GrowthInterval clean steps
//	if !skipped { scheduler.Step() }      // an LR schedule must not advance on a skipped step
//
// Gradient accumulation: the scale is constant inside an accumulation window because Update runs once per
// optimizer step, so the scaled micro-batch gradients add up consistently; unscale once per optimizer step,
// never per micro-batch. The loss the trainer logs is the one the forward computed (FP32, unscaled): the scale
// only ever enters as the backward's seed.
//
// A disabled scaler (BF16 or FP32 training, see NewGradScalerFor) reports scale 1, never unscales, never skips
// and its state dict is empty. A GradScaler serves one optimizer (tune's optimizer updates one flat buffer);
// it is not safe for concurrent use.
type GradScaler struct {
	b       tensor.Backend
	opts    GradScalerOptions
	scale   float32 // _scale: FP32 as on the device in PyTorch
	tracker int32   // _growth_tracker: consecutive clean steps since the last growth or backoff
	stage   stage
	found   bool // found_inf of this step (valid once stage ≥ unscaled)
}

// NewGradScaler returns a GradScaler running its unscale on backend b. It errors when the options are out of
// range (PyTorch asserts growth_factor > 1 and backoff_factor < 1; tune also requires a finite positive
// init_scale, a positive backoff_factor and growth_interval ≥ 1). A disabled scaler skips the checks.
func NewGradScaler(b tensor.Backend, o GradScalerOptions) (*GradScaler, error) {
	s := &GradScaler{b: b, opts: o, scale: 1}
	if !o.Enabled {
		return s, nil
	}
	if err := checkOptions("init_scale", o.InitScale, o.GrowthFactor, o.BackoffFactor, o.GrowthInterval); err != nil {
		return nil, fmt.Errorf("amp: NewGradScaler: %w", err)
	}
	s.scale = float32(o.InitScale)
	return s, nil
}

// NewGradScalerFor returns the scaler a policy needs: PyTorch's defaults for FP16 autocast, and a disabled one
// for BF16 and FP32, which need no loss scaling (accelerate creates a GradScaler only for fp16, torch/amp/autocast_mode.py).
func NewGradScalerFor(b tensor.Backend, p Policy) (*GradScaler, error) {
	o := DefaultGradScalerOptions()
	o.Enabled = p.Enabled && p.DType == tensor.F16
	return NewGradScaler(b, o)
}

// checkOptions validates a scale (named scaleKey in messages) and the growth parameters.
func checkOptions(scaleKey string, initScale, growth, backoff float64, interval int) error {
	switch {
	case !(initScale > 0) || math.IsInf(float64(float32(initScale)), 0) || float32(initScale) == 0:
		return fmt.Errorf("%s %v must be a positive number representable in FP32 (PyTorch's default is 65536)", scaleKey, initScale)
	case float32(initScale) < MinScale:
		return fmt.Errorf("%s %v is below %v, the smallest normal FP32 (amp.MinScale): its reciprocal overflows FP32, so every gradient would unscale to inf (PyTorch's default is 65536)", scaleKey, initScale, float32(MinScale))
	case !(growth > 1) || math.IsInf(growth, 0):
		return fmt.Errorf("growth_factor %v must be > 1 (PyTorch's default is 2)", growth)
	case !(backoff > 0 && backoff < 1):
		return fmt.Errorf("backoff_factor %v must be in (0, 1) (PyTorch's default is 0.5)", backoff)
	case interval < 1:
		return fmt.Errorf("growth_interval %d must be ≥ 1 (PyTorch's default is 2000)", interval)
	}
	return nil
}

// Enabled reports whether the scaler scales (false for BF16/FP32 training).
func (s *GradScaler) Enabled() bool { return s.opts.Enabled }

// Scale returns the current loss scale, the seed of the backward pass: the gradient of the loss is seeded with
// Scale() instead of 1, so every gradient is multiplied by it. 1 when disabled. It is PyTorch's get_scale().
func (s *GradScaler) Scale() float32 { return s.scale }

// GrowthTracker returns the number of consecutive clean steps since the last growth or backoff
// (PyTorch's _growth_tracker); 0 when disabled.
func (s *GradScaler) GrowthTracker() int { return int(s.tracker) }

// FoundInf reports whether the last Unscale of this step saw an inf or NaN (false before Unscale and after
// Update).
func (s *GradScaler) FoundInf() bool { return s.found }

// CheckGradients returns an error wrapping ErrHalfGradients if a gradient is not F32. The trainer calls it at
// startup so that a recipe forcing half-precision trainable weights with FP16 loss scaling fails before any
// training time is spent (GradScaler's refusal of FP16 gradients, torch/amp/grad_scaler.py) rather than at the first Unscale. Nil gradients (frozen parameters) are
// skipped. A disabled scaler accepts anything.
func (s *GradScaler) CheckGradients(grads []*tensor.Tensor) error {
	if !s.opts.Enabled {
		return nil
	}
	for i, g := range grads {
		if g == nil || g.DType == tensor.F32 {
			continue
		}
		if g.DType == tensor.F16 {
			return fmt.Errorf("amp: Attempting to unscale FP16 gradients: keep trainable parameters in FP32 (master weights; only frozen weights may be F16), or train without fp16 loss scaling (gradient %d is %v): %w", i, g, ErrHalfGradients)
		}
		return fmt.Errorf("amp: cannot unscale %v gradients: keep trainable parameters in FP32 master weights; bf16 training needs no GradScaler (use amp.NewGradScalerFor) (gradient %d is %v): %w", g.DType, i, g, ErrHalfGradients)
	}
	return nil
}

// Unscale divides every gradient in place by the scale and records whether any element is inf or NaN, in one
// fused pass (Backend.NonFiniteCheckAndUnscale, PyTorch's _amp_foreach_non_finite_check_and_unscale_) with
// inv_scale = float32(1/float64(scale)). grads are F32 (nil entries, frozen parameters, are skipped). Call it
// once per optimizer step, after the last micro-batch's backward and before clipping.
//
// Errors: a second Unscale before Update, or an Unscale after Step (ErrScalerOrder); half-precision gradients
// (ErrHalfGradients); no gradient at all. A disabled scaler does nothing.
func (s *GradScaler) Unscale(grads []*tensor.Tensor) error {
	if !s.opts.Enabled {
		return nil
	}
	switch s.stage {
	case unscaled:
		return fmt.Errorf("amp: GradScaler.Unscale has already been called since the last Update: unscale once per optimizer step, after the last micro-batch: %w", ErrScalerOrder)
	case stepped:
		return fmt.Errorf("amp: GradScaler.Unscale called after Step: call Update to finish the step first: %w", ErrScalerOrder)
	}
	if err := s.CheckGradients(grads); err != nil {
		return err
	}
	live := liveGrads(grads)
	if len(live) == 0 {
		return fmt.Errorf("amp: GradScaler.Unscale: no gradients to unscale (every entry is nil); pass the trainable parameters' gradients")
	}
	invScale := float32(1 / float64(s.scale))
	found, err := s.b.NonFiniteCheckAndUnscale(live, invScale)
	if err != nil {
		return fmt.Errorf("amp: GradScaler.Unscale: %w", err)
	}
	s.found = found
	s.stage = unscaled
	return nil
}

// Step runs optimizerStep unless the gradients held an inf or NaN, and reports whether it skipped. If Unscale
// has not run since the last Update, Step calls Unscale(grads) first (grads are used only then); clipping needs
// the explicit Unscale before it. A skipped step leaves weights and optimizer state untouched, so the caller
// must not advance its LR schedule or the optimizer's own step count t (the trainer checks skipped); the HF
// Trainer still counts a skipped step in global_step (the schedule holding on a skipped step, transformers' trainer.py). An error from
// optimizerStep is returned as is and leaves the stage unchanged. A second Step before Update is an
// ErrScalerOrder error. A disabled scaler always runs optimizerStep.
func (s *GradScaler) Step(optimizerStep func() error, grads ...*tensor.Tensor) (skipped bool, err error) {
	if !s.opts.Enabled {
		return false, optimizerStep()
	}
	switch s.stage {
	case stepped:
		return false, fmt.Errorf("amp: GradScaler.Step has already been called since the last Update: call Update once after each Step: %w", ErrScalerOrder)
	case ready:
		if len(grads) == 0 {
			return false, fmt.Errorf("amp: GradScaler.Step before Unscale: call Unscale(grads) first, or pass the gradients to Step: %w", ErrScalerOrder)
		}
		if err := s.Unscale(grads); err != nil {
			return false, err
		}
	}
	if !s.found {
		if err := optimizerStep(); err != nil {
			return false, err
		}
	}
	s.stage = stepped
	return s.found, nil
}

// Update adjusts the scale for the next step exactly as torch._amp_update_scale_ does, then resets the per-step
// state: after an inf/NaN the scale is multiplied by backoff_factor (in float64, rounded to FP32; never below
// MinScale, where PyTorch has no floor) and the tracker reset to 0; after a clean step the tracker counts it, and when it reaches growth_interval the scale is
// multiplied by growth_factor, but only if the FP32 result is finite (the scale stops at 2^127 for factor 2,
// the loss-scale cap of _amp_update_scale_ in aten/src/ATen/native/cuda/AmpKernels.cu), and the tracker is reset to 0. Update before any Unscale or Step of this step is an
// ErrScalerOrder error. A disabled scaler does nothing.
func (s *GradScaler) Update() error {
	if !s.opts.Enabled {
		return nil
	}
	if s.stage == ready {
		return fmt.Errorf("amp: GradScaler.Update: no inf checks were recorded for this step: call Unscale or Step before Update: %w", ErrScalerOrder)
	}
	if s.found {
		s.scale = max(roundF32(float64(s.scale)*s.opts.BackoffFactor), MinScale)
		s.tracker = 0
	} else if s.tracker+1 == int32(s.opts.GrowthInterval) {
		if grown := roundF32(float64(s.scale) * s.opts.GrowthFactor); !math.IsInf(float64(grown), 0) {
			s.scale = grown
		}
		s.tracker = 0
	} else {
		s.tracker++
	}
	s.reset()
	return nil
}

// UpdateTo sets the scale to newScale (PyTorch's update(new_scale)) and resets the per-step state; the growth
// tracker is kept. newScale must be finite and at least MinScale (a normal FP32 number). A disabled scaler
// ignores it.
func (s *GradScaler) UpdateTo(newScale float32) error {
	if !s.opts.Enabled {
		return nil
	}
	if !(newScale >= MinScale) || math.IsInf(float64(newScale), 0) {
		return fmt.Errorf("amp: GradScaler.UpdateTo: new scale %v must be finite and at least %v (amp.MinScale, the smallest normal FP32)", newScale, float32(MinScale))
	}
	s.scale = newScale
	s.reset()
	return nil
}

func (s *GradScaler) reset() { s.stage, s.found = ready, false }

// roundF32 rounds x to the nearest FP32 (ties to even) as a C++ double→float conversion does, giving ±Inf when
// the rounded magnitude exceeds math.MaxFloat32 (Go leaves out-of-range conversions implementation-defined).
func roundF32(x float64) float32 {
	const overflow = 0x1.ffffffp127 // MaxFloat32 + half an ulp: the first magnitude that rounds to Inf
	if x >= overflow {
		return float32(math.Inf(1))
	}
	if x <= -overflow {
		return float32(math.Inf(-1))
	}
	return float32(x)
}
