package amp

import (
	"fmt"
	"math"

	"github.com/tune-ml/tune/tensor"
)

// DeviceScaler is a GradScaler's state kept in device memory, as PyTorch keeps _scale and _growth_tracker:
// the unscale writes its found-inf flag on the device (Backend.NonFiniteCheckAndUnscaleOnDevice), the
// optimizer skips by that flag (tensor.AdamWArgs.Skip), and the scale update runs there (Backend.UpdateScale),
// so an FP16 step needs no host wait. The host follows with GradScaler.UpdateFound when it reads the flags,
// which gives the same scale and tracker (the same arithmetic), so the GradScaler's StateDict stays the
// checkpoint's.
//
// One step is: seed the backward with share·Scale (transformer.ForwardOptions.LossScale), Unscale(grads),
// clip, AdamW with Skip = Found, Update(record).
type DeviceScaler struct {
	b    tensor.Backend
	opts GradScalerOptions
	// Scale (F32 (1)) is the loss scale of the next backward, GrowthTracker (I32 (1)) PyTorch's
	// _growth_tracker, Found (I32 (1)) the found-inf flag of the step in progress (reset by Update), Steps
	// (I32 (1)) the steps since OnDevice whose gradients were finite: the optimizer steps taken
	// (tensor.AdamWArgs.Row), and Skipped (I32 (1)) the skipped steps in a row.
	Scale, GrowthTracker, Found, Steps, Skipped *tensor.Tensor
	// MaxSkipped, when > 0, is max_consecutive_skipped_steps: once that many steps in a row were skipped,
	// Update leaves Found set, so every later step is skipped too until the host reads the flags and stops.
	MaxSkipped int
}

// PowersOfTwo reports whether every scale s can reach is a power of two: init_scale, growth_factor and
// backoff_factor are (PyTorch's defaults 2^16, 2, 0.5 are). Then s·x is exact in FP32 and FP64 (away from
// the subnormals), so a loss gradient seeded on the device with share·s (transformer.ForwardOptions.LossScale)
// has the bits of one seeded with the host's float32(s·share): the condition for DeviceScaler's steps to be
// those of GradScaler's.
func (s *GradScaler) PowersOfTwo() bool {
	pow2 := func(x float64) bool { f, _ := math.Frexp(x); return f == 0.5 }
	return s.opts.Enabled && pow2(float64(s.scale)) && pow2(s.opts.GrowthFactor) && pow2(s.opts.BackoffFactor)
}

// OnDevice returns a DeviceScaler starting from s's scale and growth tracker, Steps 0. s must be enabled and
// between steps (after Update).
func (s *GradScaler) OnDevice() (*DeviceScaler, error) {
	if !s.opts.Enabled {
		return nil, fmt.Errorf("amp: GradScaler.OnDevice: the scaler is disabled (bf16 and fp32 need no loss scaling)")
	}
	if s.stage != ready {
		return nil, fmt.Errorf("amp: GradScaler.OnDevice in the middle of a step: call Update first: %w", ErrScalerOrder)
	}
	d := &DeviceScaler{b: s.b, opts: s.opts}
	var err error
	if d.Scale, err = s.b.Alloc(tensor.F32, 1); err == nil {
		err = s.b.Upload(d.Scale, []float32{s.scale})
	}
	if err == nil {
		if d.GrowthTracker, err = s.b.Alloc(tensor.I32, 1); err == nil {
			err = s.b.Upload(d.GrowthTracker, []int32{s.tracker})
		}
	}
	for _, x := range []**tensor.Tensor{&d.Found, &d.Steps, &d.Skipped} {
		if err == nil {
			*x, err = s.b.Alloc(tensor.I32, 1)
		}
	}
	if err != nil {
		d.Free()
		return nil, fmt.Errorf("amp: GradScaler.OnDevice: %w", err)
	}
	return d, nil
}

// Unscale divides the F32 gradients (nil entries skipped) in place by the device scale and sets Found when any
// element is Inf or NaN, without waiting: GradScaler.Unscale on the device.
func (d *DeviceScaler) Unscale(grads []*tensor.Tensor) error {
	live := liveGrads(grads)
	if len(live) == 0 {
		return fmt.Errorf("amp: DeviceScaler.Unscale: no gradients to unscale (every entry is nil); pass the trainable parameters' gradients")
	}
	if err := d.b.NonFiniteCheckAndUnscaleOnDevice(live, d.Scale, d.Found); err != nil {
		return fmt.Errorf("amp: DeviceScaler.Unscale: %w", err)
	}
	return nil
}

// Update is GradScaler.Update on the device from Found, which it copies into record (I32 (1), optional: the
// step's slot of a ring the host reads later) and resets (see MaxSkipped), counting the step in Steps when
// it was not skipped.
func (d *DeviceScaler) Update(record *tensor.Tensor) error {
	err := d.b.UpdateScale(tensor.UpdateScaleArgs{Scale: d.Scale, GrowthTracker: d.GrowthTracker, FoundInf: d.Found, Record: record,
		Steps: d.Steps, Skipped: d.Skipped, MaxSkipped: d.MaxSkipped,
		GrowthFactor: d.opts.GrowthFactor, BackoffFactor: d.opts.BackoffFactor, GrowthInterval: d.opts.GrowthInterval, MinScale: MinScale})
	if err != nil {
		return fmt.Errorf("amp: DeviceScaler.Update: %w", err)
	}
	return nil
}

// Read downloads the device state (one wait): the scale, the growth tracker and Steps.
func (d *DeviceScaler) Read() (scale float32, tracker, steps int, err error) {
	s, t := make([]float32, 1), make([]int32, 2)
	if err = d.b.Download(s, d.Scale); err == nil {
		if err = d.b.Download(t[:1], d.GrowthTracker); err == nil {
			err = d.b.Download(t[1:], d.Steps)
		}
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("amp: DeviceScaler.Read: %w", err)
	}
	return s[0], int(t[0]), int(t[1]), nil
}

// Free releases the device state.
func (d *DeviceScaler) Free() {
	for _, x := range []*tensor.Tensor{d.Scale, d.GrowthTracker, d.Found, d.Steps, d.Skipped} {
		if x != nil {
			d.b.Free(x)
		}
	}
}

// UpdateFound finishes a step whose inf check ran on the device (DeviceScaler), given its found-inf flag as
// the host read it: Update as if Unscale had found it. It returns whether the step was skipped. It is an
// ErrScalerOrder error in the middle of a host-side step. A disabled scaler does nothing.
func (s *GradScaler) UpdateFound(found bool) (skipped bool, err error) {
	if !s.opts.Enabled {
		return false, nil
	}
	if s.stage != ready {
		return false, fmt.Errorf("amp: GradScaler.UpdateFound in the middle of a host-side step: %w", ErrScalerOrder)
	}
	s.found, s.stage = found, stepped
	return found, s.Update()
}
