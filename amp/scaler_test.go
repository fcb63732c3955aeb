package amp

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// scriptBackend stands in for a Backend in tests of GradScaler's state machine: its
// NonFiniteCheckAndUnscale reports the scripted found flag and records the call. Any other op panics (the
// embedded nil interface), which proves the scaler calls nothing else.
type scriptBackend struct {
	tensor.Backend
	found     bool
	calls     int
	lastInv   float32
	lastCount int
}

func (f *scriptBackend) NonFiniteCheckAndUnscale(ts []*tensor.Tensor, invScale float32) (bool, error) {
	f.calls++
	f.lastInv, f.lastCount = invScale, len(ts)
	return f.found, nil
}

// fakeGrads returns n F32 gradient descriptors without buffers (scriptBackend never reads them).
func fakeGrads(n int, dt tensor.DType) []*tensor.Tensor {
	gs := make([]*tensor.Tensor, n)
	for i := range gs {
		gs[i] = &tensor.Tensor{Shape: tensor.Shape{3}, DType: dt}
	}
	return gs
}

func newTestScaler(t *testing.T, b tensor.Backend, o GradScalerOptions) *GradScaler {
	t.Helper()
	s, err := NewGradScaler(b, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// scalerStep runs one full optimizer step (Unscale inside Step, then Update) with the scripted found flag and
// reports whether the optimizer ran.
func scalerStep(t *testing.T, s *GradScaler, f *scriptBackend, found bool) (ran bool) {
	t.Helper()
	f.found = found
	skipped, err := s.Step(func() error { ran = true; return nil }, fakeGrads(2, tensor.F32)...)
	if err != nil {
		t.Fatal(err)
	}
	if skipped != found || ran == found {
		t.Fatalf("found=%v: Step skipped=%v ran=%v; want skipped exactly when found", found, skipped, ran)
	}
	if err := s.Update(); err != nil {
		t.Fatal(err)
	}
	return ran
}

func TestNewGradScalerValidation(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*GradScalerOptions)
		errHas string
	}{
		{"defaults are valid", func(*GradScalerOptions) {}, ""},
		{"growth_factor must exceed 1", func(o *GradScalerOptions) { o.GrowthFactor = 1 }, "growth_factor"},
		{"backoff_factor must be below 1", func(o *GradScalerOptions) { o.BackoffFactor = 1 }, "backoff_factor"},
		{"backoff_factor must be positive", func(o *GradScalerOptions) { o.BackoffFactor = 0 }, "backoff_factor"},
		{"init_scale must be positive", func(o *GradScalerOptions) { o.InitScale = 0 }, "init_scale"},
		{"init_scale must fit FP32", func(o *GradScalerOptions) { o.InitScale = 1e39 }, "init_scale"},
		{"init_scale NaN", func(o *GradScalerOptions) { o.InitScale = math.NaN() }, "init_scale"},
		{"growth_interval must be at least 1", func(o *GradScalerOptions) { o.GrowthInterval = 0 }, "growth_interval"},
		{"disabled skips validation", func(o *GradScalerOptions) { o.Enabled, o.GrowthFactor = false, 0 }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultGradScalerOptions()
			tt.modify(&o)
			_, err := NewGradScaler(&scriptBackend{}, o)
			if tt.errHas == "" {
				if err != nil {
					t.Fatalf("NewGradScaler(%+v) = %v, want success", o, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.errHas) || !strings.HasPrefix(err.Error(), "amp: ") {
				t.Fatalf("NewGradScaler(%+v) error = %v, want an amp: error naming %s", o, err, tt.errHas)
			}
		})
	}
}

// TestGradScalerDefaults checks PyTorch's defaults as the state dict reports them before the first step.
func TestGradScalerDefaults(t *testing.T) {
	s := newTestScaler(t, &scriptBackend{}, DefaultGradScalerOptions())
	want := GradScalerState{Scale: 65536, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000, GrowthTracker: 0}
	if got := s.StateDict(); got != want {
		t.Errorf("StateDict() = %+v, want %+v", got, want)
	}
	if s.Scale() != 65536 || !s.Enabled() {
		t.Errorf("Scale() = %v, Enabled() = %v; want 65536, true", s.Scale(), s.Enabled())
	}
}

// TestUpdateVerifiedSequence replays the sequence verified on PyTorch (torch/amp/grad_scaler.py and aten/src/ATen/native/cuda/AmpKernels.cu): interval 2, init 8, found
// 0,0,1,0,0 gives scales 8→8→16→8→8→16 and trackers 1,0,0,1,0.
func TestUpdateVerifiedSequence(t *testing.T) {
	f := &scriptBackend{}
	s := newTestScaler(t, f, GradScalerOptions{InitScale: 8, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2, Enabled: true})
	found := []bool{false, false, true, false, false}
	wantScale := []float32{8, 16, 8, 8, 16}
	wantTracker := []int{1, 0, 0, 1, 0}
	for i, fi := range found {
		scalerStep(t, s, f, fi)
		if s.Scale() != wantScale[i] || s.GrowthTracker() != wantTracker[i] {
			t.Errorf("after step %d (found_inf=%v): scale %v tracker %d, want %v and %d", i+1, fi, s.Scale(), s.GrowthTracker(), wantScale[i], wantTracker[i])
		}
	}
}

// TestScaleCapB08 checks the loss-scale cap (_amp_update_scale_ in aten/src/ATen/native/cuda/AmpKernels.cu), first run: growth_interval 1 and clean steps double the scale from 2^16 up to
// 2^127, reached at step 111; the growth that would give inf is skipped and the tracker is still reset.
func TestScaleCapB08(t *testing.T) {
	f := &scriptBackend{}
	o := DefaultGradScalerOptions()
	o.GrowthInterval = 1
	s := newTestScaler(t, f, o)
	capScale := float32(math.Ldexp(1, 127))
	reached := 0
	for step := 1; step <= 150; step++ {
		scalerStep(t, s, f, false)
		sc := s.Scale()
		if math.IsInf(float64(sc), 0) || math.IsNaN(float64(sc)) {
			t.Fatalf("step %d: scale became %v", step, sc)
		}
		if s.GrowthTracker() != 0 {
			t.Fatalf("step %d: tracker %d, want 0 after every growth attempt", step, s.GrowthTracker())
		}
		if sc == capScale && reached == 0 {
			reached = step
		}
	}
	if reached != 111 || s.Scale() != capScale {
		t.Errorf("scale reached 2^127 at step %d and ended at %v; want step 111 and %v", reached, s.Scale(), capScale)
	}
	if float64(s.Scale()) != 1.7014118346046923e38 {
		t.Errorf("final scale %v, want 1.7014118346046923e38", s.Scale())
	}
}

// TestDefaultIntervalB08 checks the loss-scale cap (_amp_update_scale_ in aten/src/ATen/native/cuda/AmpKernels.cu), second run: defaults, 3 overflows then 2000 clean steps.
func TestDefaultIntervalB08(t *testing.T) {
	f := &scriptBackend{}
	s := newTestScaler(t, f, DefaultGradScalerOptions())
	for range 3 {
		scalerStep(t, s, f, true)
	}
	if s.Scale() != 8192 {
		t.Fatalf("after 3 overflows scale %v, want 8192", s.Scale())
	}
	for range 1999 {
		scalerStep(t, s, f, false)
	}
	if s.Scale() != 8192 || s.GrowthTracker() != 1999 {
		t.Fatalf("after 1999 clean steps scale %v tracker %d, want 8192 and 1999", s.Scale(), s.GrowthTracker())
	}
	scalerStep(t, s, f, false)
	if s.Scale() != 16384 || s.GrowthTracker() != 0 {
		t.Fatalf("after the 2000th clean step scale %v tracker %d, want 16384 and 0", s.Scale(), s.GrowthTracker())
	}
}

// TestNonPowerOfTwoFactors checks that growth and backoff are computed in float64 and rounded once to FP32, as
// the CUDA kernel multiplies its float scale by a double factor.
func TestNonPowerOfTwoFactors(t *testing.T) {
	f := &scriptBackend{}
	s := newTestScaler(t, f, GradScalerOptions{InitScale: 1000, GrowthFactor: 1.1, BackoffFactor: 0.3, GrowthInterval: 1, Enabled: true})
	want := float32(1000)
	for i, found := range []bool{false, false, true, false, true, true, false} {
		scalerStep(t, s, f, found)
		if found {
			want = float32(float64(want) * 0.3)
		} else {
			want = float32(float64(want) * 1.1)
		}
		if s.Scale() != want {
			t.Fatalf("step %d: scale %v (bits %08x), want %v (bits %08x)", i+1, s.Scale(), math.Float32bits(s.Scale()), want, math.Float32bits(want))
		}
	}
}

// TestUnscaleInvScale checks inv_scale = float32(1/float64(scale)) and one fused call over all gradients, nil
// gradients (frozen parameters) left out.
func TestUnscaleInvScale(t *testing.T) {
	for _, tt := range []struct {
		name  string
		scale float64
	}{
		{"power of two is exact", 65536},
		{"a third rounds once", 3},
		{"non-representable init_scale", 0.1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &scriptBackend{}
			o := DefaultGradScalerOptions()
			o.InitScale = tt.scale
			s := newTestScaler(t, f, o)
			grads := append(fakeGrads(3, tensor.F32), nil)
			if err := s.Unscale(grads); err != nil {
				t.Fatal(err)
			}
			want := float32(1 / float64(float32(tt.scale)))
			if f.calls != 1 || f.lastCount != 3 || f.lastInv != want {
				t.Errorf("backend called %d times with %d tensors and inv_scale %v; want once, 3 tensors, %v", f.calls, f.lastCount, f.lastInv, want)
			}
		})
	}
}

// TestScalerOrderErrors checks every misuse PyTorch rejects, and that each message says what to do.
func TestScalerOrderErrors(t *testing.T) {
	noop := func() error { return nil }
	tests := []struct {
		name   string
		run    func(s *GradScaler) error
		errHas string
	}{
		{"unscale twice before update", func(s *GradScaler) error {
			_ = s.Unscale(fakeGrads(1, tensor.F32))
			return s.Unscale(fakeGrads(1, tensor.F32))
		}, "unscale once per optimizer step"},
		{"unscale after step", func(s *GradScaler) error {
			_, _ = s.Step(noop, fakeGrads(1, tensor.F32)...)
			return s.Unscale(fakeGrads(1, tensor.F32))
		}, "call Update"},
		{"step twice before update", func(s *GradScaler) error {
			_, _ = s.Step(noop, fakeGrads(1, tensor.F32)...)
			_, err := s.Step(noop, fakeGrads(1, tensor.F32)...)
			return err
		}, "call Update once after each Step"},
		{"step without unscale or gradients", func(s *GradScaler) error {
			_, err := s.Step(noop)
			return err
		}, "call Unscale(grads) first"},
		{"update before unscale or step", func(s *GradScaler) error { return s.Update() }, "call Unscale or Step before Update"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestScaler(t, &scriptBackend{}, DefaultGradScalerOptions())
			err := tt.run(s)
			if !errors.Is(err, ErrScalerOrder) || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("error = %v, want ErrScalerOrder saying %q", err, tt.errHas)
			}
		})
	}
}

func TestUnscaleNoGradients(t *testing.T) {
	s := newTestScaler(t, &scriptBackend{}, DefaultGradScalerOptions())
	if err := s.Unscale([]*tensor.Tensor{nil, nil}); err == nil {
		t.Fatal("Unscale of only nil gradients succeeded; PyTorch asserts that inf checks were recorded")
	}
}

// TestStepUnscalesOnce checks that Step unscales by itself when Unscale was not called, and not a second time
// after an explicit Unscale (the clipping path).
func TestStepUnscalesOnce(t *testing.T) {
	for _, explicit := range []bool{false, true} {
		t.Run(map[bool]string{false: "implicit unscale", true: "explicit unscale then step"}[explicit], func(t *testing.T) {
			f := &scriptBackend{}
			s := newTestScaler(t, f, DefaultGradScalerOptions())
			g := fakeGrads(2, tensor.F32)
			if explicit {
				if err := s.Unscale(g); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Step(func() error { return nil }, g...); err != nil {
				t.Fatal(err)
			}
			if f.calls != 1 {
				t.Errorf("NonFiniteCheckAndUnscale called %d times, want 1", f.calls)
			}
		})
	}
}

// TestStepOptimizerError checks that an optimizer error is returned and leaves the step retryable.
func TestStepOptimizerError(t *testing.T) {
	s := newTestScaler(t, &scriptBackend{}, DefaultGradScalerOptions())
	boom := errors.New("boom")
	if _, err := s.Step(func() error { return boom }, fakeGrads(1, tensor.F32)...); !errors.Is(err, boom) {
		t.Fatalf("Step error = %v, want the optimizer's error", err)
	}
	if _, err := s.Step(func() error { return nil }); err != nil {
		t.Fatalf("retrying Step after an optimizer error: %v", err)
	}
}

// TestHalfGradientsB14 checks GradScaler's refusal of FP16 gradients (torch/amp/grad_scaler.py): FP16 (or BF16) gradients under FP16 loss scaling are an error naming the
// fix, reported by CheckGradients at startup and by Unscale before the backend is touched.
func TestHalfGradientsB14(t *testing.T) {
	for _, tt := range []struct {
		dt     tensor.DType
		errHas string
	}{
		{tensor.F16, "Attempting to unscale FP16 gradients: keep trainable parameters in FP32"},
		{tensor.BF16, "bf16 training needs no GradScaler"},
	} {
		t.Run(tt.dt.String(), func(t *testing.T) {
			f := &scriptBackend{}
			s := newTestScaler(t, f, DefaultGradScalerOptions())
			grads := append(fakeGrads(1, tensor.F32), fakeGrads(1, tt.dt)...)
			for name, err := range map[string]error{"CheckGradients": s.CheckGradients(grads), "Unscale": s.Unscale(grads)} {
				if !errors.Is(err, ErrHalfGradients) || !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("%s error = %v, want ErrHalfGradients saying %q", name, err, tt.errHas)
				}
			}
			if f.calls != 0 {
				t.Errorf("backend called %d times for rejected gradients", f.calls)
			}
		})
	}
}

// TestDisabledScalerB13 checks bf16 without loss scaling (torch.amp's GradScaler is for float16): BF16 and FP32 get a disabled scaler that reports scale 1, never touches
// the gradients, never skips a step (even with inf gradients) and has an empty state dict.
func TestDisabledScalerB13(t *testing.T) {
	for _, p := range []Policy{BF16, FP32} {
		t.Run(p.String(), func(t *testing.T) {
			f := &scriptBackend{found: true}
			s, err := NewGradScalerFor(f, p)
			if err != nil {
				t.Fatal(err)
			}
			for step := range 3 {
				if err := s.Unscale(fakeGrads(1, tensor.BF16)); err != nil {
					t.Fatal(err)
				}
				ran := false
				skipped, err := s.Step(func() error { ran = true; return nil })
				if err != nil || skipped || !ran {
					t.Fatalf("step %d: skipped=%v ran=%v err=%v; want the optimizer to run", step, skipped, ran, err)
				}
				if err := s.Update(); err != nil {
					t.Fatal(err)
				}
			}
			if s.Enabled() || s.Scale() != 1 || f.calls != 0 {
				t.Errorf("Enabled %v Scale %v backend calls %d; want false, 1, 0", s.Enabled(), s.Scale(), f.calls)
			}
			if !s.StateDict().IsEmpty() {
				t.Errorf("StateDict() = %+v, want empty", s.StateDict())
			}
		})
	}
	s, err := NewGradScalerFor(&scriptBackend{}, FP16)
	if err != nil || !s.Enabled() || s.Scale() != 65536 {
		t.Errorf("NewGradScalerFor(FP16) = enabled %v scale %v err %v; want PyTorch's defaults", s.Enabled(), s.Scale(), err)
	}
}

func TestUpdateTo(t *testing.T) {
	f := &scriptBackend{}
	s := newTestScaler(t, f, GradScalerOptions{InitScale: 8, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3, Enabled: true})
	scalerStep(t, s, f, false)
	if err := s.UpdateTo(1024); err != nil {
		t.Fatal(err)
	}
	if s.Scale() != 1024 || s.GrowthTracker() != 1 {
		t.Errorf("UpdateTo(1024): scale %v tracker %d, want 1024 and the tracker kept at 1", s.Scale(), s.GrowthTracker())
	}
	if err := s.UpdateTo(float32(math.Inf(1))); err == nil {
		t.Error("UpdateTo(+Inf) succeeded")
	}
}

// TestRoundF32 checks the double→float rounding at the overflow boundary, which decides whether the scale may
// grow past 2^127 with a non-power-of-two factor.
func TestRoundF32(t *testing.T) {
	maxf := float64(math.MaxFloat32)
	for _, tt := range []struct {
		name string
		in   float64
		inf  bool
	}{
		{"MaxFloat32 stays", maxf, false},
		{"just below the midpoint rounds down", 0x1.fffffefffffffp127, false},
		{"the midpoint rounds to even, i.e. to Inf", 0x1.ffffffp127, true},
		{"2^128 is Inf", 0x1p128, true},
		{"negative midpoint is -Inf", -0x1.ffffffp127, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := roundF32(tt.in)
			if math.IsInf(float64(got), 0) != tt.inf {
				t.Errorf("roundF32(%x) = %v, want inf=%v", tt.in, got, tt.inf)
			}
		})
	}
}
