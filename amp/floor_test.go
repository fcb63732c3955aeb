package amp

import (
	"math"
	"strings"
	"testing"
)

// TestScaleFloor backs off from PyTorch's default scale on every step: PyTorch's rule would reach the FP32
// subnormals after 143 backoffs (2^16 · 2^-143 = 2^-127) and 0 after 166; tune's scale follows PyTorch's exactly
// down to 2^-126 (step 142) and stays there, so the reciprocal unscale uses stays finite and the state dict
// stays loadable.
func TestScaleFloor(t *testing.T) {
	f := &scriptBackend{}
	s := newTestScaler(t, f, DefaultGradScalerOptions())
	pytorch := float32(65536)
	for step := 1; step <= 200; step++ {
		scalerStep(t, s, f, true)
		pytorch = float32(float64(pytorch) * 0.5) // torch._amp_update_scale_'s backoff, no floor
		want := max(pytorch, MinScale)
		if s.Scale() != want {
			t.Fatalf("step %d: scale %v, want %v (PyTorch's %v floored at MinScale)", step, s.Scale(), want, pytorch)
		}
		if inv := float32(1 / float64(s.Scale())); math.IsInf(float64(inv), 0) {
			t.Fatalf("step %d: inv_scale of scale %v is inf", step, s.Scale())
		}
	}
	if pytorch != 0 || s.Scale() != MinScale {
		t.Fatalf("after 200 backoffs PyTorch's rule gives %v and tune %v; want 0 and MinScale", pytorch, s.Scale())
	}
	if f.lastInv != float32(0x1p126) {
		t.Errorf("unscale at the floor used inv_scale %v, want 2^126", f.lastInv)
	}
	// The state saved at the floor loads back.
	s2 := newTestScaler(t, &scriptBackend{}, DefaultGradScalerOptions())
	if err := s2.LoadStateDict(s.StateDict()); err != nil || s2.Scale() != MinScale {
		t.Fatalf("loading the floor's state: %v (scale %v)", err, s2.Scale())
	}
}

// TestScaleFloorLargeBackoff: a backoff factor that jumps over the floor in one step still stops at it.
func TestScaleFloorLargeBackoff(t *testing.T) {
	f := &scriptBackend{}
	o := DefaultGradScalerOptions()
	o.InitScale, o.BackoffFactor = 1e-37, 1e-3
	s := newTestScaler(t, f, o)
	scalerStep(t, s, f, true)
	if s.Scale() != MinScale {
		t.Fatalf("scale %v after backing off 1e-37 by 1e-3, want MinScale %v", s.Scale(), float32(MinScale))
	}
}

// TestScaleBelowFloorRefused: a subnormal or zero scale cannot be set, constructed or loaded, and the error
// says why.
func TestScaleBelowFloorRefused(t *testing.T) {
	sub := float32(0x1p-130)
	o := DefaultGradScalerOptions()
	o.InitScale = float64(sub)
	if _, err := NewGradScaler(&scriptBackend{}, o); err == nil || !strings.Contains(err.Error(), "smallest normal FP32") {
		t.Errorf("NewGradScaler(init_scale 2^-130) = %v, want an error naming the FP32 floor", err)
	}
	s := newTestScaler(t, &scriptBackend{}, DefaultGradScalerOptions())
	if err := s.UpdateTo(sub); err == nil {
		t.Error("UpdateTo(2^-130) succeeded")
	}
	st := s.StateDict()
	for _, bad := range []float64{float64(sub), 0} {
		st.Scale = bad
		if err := s.LoadStateDict(st); err == nil {
			t.Errorf("LoadStateDict(scale %v) succeeded", bad)
		}
	}
	if s.Scale() != 65536 {
		t.Errorf("a refused load changed the scale to %v", s.Scale())
	}
}
