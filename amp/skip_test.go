package amp

import (
	"math"
	"slices"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// lambdaLR is a minimal torch.optim.lr_scheduler.LambdaLR for these tests: lr = base·lambda(step), step counting
// the scheduler's Step calls from 0.
type lambdaLR struct {
	base   float64
	lambda func(step int) float64
	step   int
}

func (s *lambdaLR) LR() float64 { return s.base * s.lambda(s.step) }
func (s *lambdaLR) Step()       { s.step++ }

// warmup10 is the schedule factor min(1, (s+1)/10) of the skipped-step test (transformers' trainer.py holds the schedule on a skipped step).
func warmup10(s int) float64 { return min(1, float64(s+1)/10) }

// TestSchedulerNotAdvancedOnSkipB11 checks the schedule holding on a skipped step (transformers' trainer.py): SGD with base lr 1, LambdaLR min(1, (s+1)/10), the default
// scaler; the first 3 iterations overflow and the next 3 are clean. Advancing the schedule only when the step was
// not skipped gives 0.1, 0.1, 0.1, 0.2, 0.3, 0.4; advancing it always (the bug) gives 0.2 … 0.7.
func TestSchedulerNotAdvancedOnSkipB11(t *testing.T) {
	tests := []struct {
		name          string
		alwaysAdvance bool
		want          []float64
	}{
		{"scheduler steps only when the optimizer did", false, []float64{0.1, 0.1, 0.1, 0.2, 0.3, 0.4}},
		{"scheduler stepping on skipped steps is the bug", true, []float64{0.2, 0.3, 0.4, 0.5, 0.6, 0.7}},
	}
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s, err := NewGradScalerFor(b, FP16)
				must(t, err)
				sched := &lambdaLR{base: 1, lambda: warmup10}
				p := tensortest.Upload(t, b, tensor.F32, []float32{0})
				g := tensortest.Alloc(t, b, tensor.F32, 1)
				var got []float64
				skips := 0
				for it := range 6 {
					trueGrad := float32(0.5)
					if it < 3 {
						trueGrad = 1e35 // finite, but overflows FP32 once multiplied by the scale
					}
					must(t, b.Upload(g, []float32{trueGrad * s.Scale()}))
					lr := sched.LR()
					skipped, err := s.Step(func() error { return b.Axpy(p, g, -float32(lr)) }, g)
					must(t, err)
					must(t, s.Update())
					if skipped {
						skips++
					}
					if !skipped || tt.alwaysAdvance {
						sched.Step()
					}
					got = append(got, sched.LR())
				}
				if skips != 3 {
					t.Errorf("%d steps skipped, want 3", skips)
				}
				for i := range got {
					if math.Abs(got[i]-tt.want[i]) > 1e-12 {
						t.Fatalf("LR after each iteration %v, want %v", got, tt.want)
					}
				}
			})
		}
	})
}

// adamState is a flat AdamW parameter set: params, grads and the two moments, (P) F32 each.
type adamState struct {
	params, grads, m, v *tensor.Tensor
	step                int // the optimizer's own step count t
}

func newAdamState(t *testing.T, b tensor.Backend, p int) *adamState {
	init := make([]float32, p)
	for i := range init {
		init[i] = float32(math.Cos(float64(i))) * 0.1
	}
	return &adamState{params: tensortest.Upload(t, b, tensor.F32, init), grads: tensortest.Alloc(t, b, tensor.F32, p),
		m: tensortest.Alloc(t, b, tensor.F32, p), v: tensortest.Alloc(t, b, tensor.F32, p)}
}

// snapshot returns the bits of params, exp_avg and exp_avg_sq, concatenated.
func (a *adamState) snapshot(t *testing.T, b tensor.Backend) []uint32 {
	return slices.Concat(bits(tensortest.Download(t, b, a.params)), bits(tensortest.Download(t, b, a.m)),
		bits(tensortest.Download(t, b, a.v)))
}

// trueGrad is the deterministic gradient of step n (1-based) for element i.
func trueGrad(n, i int) float32 { return float32(0.01 * math.Sin(0.7*float64(i)+1.3*float64(n))) }

// TestForcedOverflowSkipsExactlyThatStep forces an overflow at step k of an AdamW run on flat buffers, in the
// trainer's order (unscale, clip, step, update, schedule). Step k must leave weights and both moments
// bit-identical, halve the scale and advance neither the LR schedule nor AdamW's step count; every other step
// runs. The whole run must then end bit-identical to a run that never saw step k's gradients.
func TestForcedOverflowSkipsExactlyThatStep(t *testing.T) {
	const (
		p     = 37
		steps = 8
		k     = 5
	)
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		train := func(t *testing.T, iterations, overflowAt int) []uint32 {
			s, err := NewGradScalerFor(b, FP16)
			must(t, err)
			a := newAdamState(t, b, p)
			sched := &lambdaLR{base: 1e-2, lambda: warmup10}
			host := make([]float32, p)
			n := 0 // index into the clean gradient sequence
			for step := 1; step <= iterations; step++ {
				overflow := step == overflowAt
				if !overflow {
					n++
				}
				for i := range host {
					g := trueGrad(n, i)
					if overflow && i == 3 {
						g = 1e35
					}
					host[i] = g * s.Scale() // backward seeded with the scale, in FP32
				}
				must(t, b.Upload(a.grads, host))
				before, scaleBefore, lrBefore, tBefore := a.snapshot(t, b), s.Scale(), sched.LR(), a.step

				must(t, s.Unscale([]*tensor.Tensor{a.grads}))
				norm, err := ClipGradNorm(b, []*tensor.Tensor{a.grads}, 1)
				must(t, err)
				skipped, err := s.Step(func() error {
					a.step++
					return b.AdamW(tensor.AdamWArgs{Params: a.params, Grads: a.grads, ExpAvg: a.m, ExpAvgSq: a.v,
						LR: float32(sched.LR()), Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: a.step})
				})
				must(t, err)
				must(t, s.Update())
				if !skipped {
					sched.Step()
				}

				if skipped != overflow {
					t.Fatalf("step %d: skipped=%v, want %v", step, skipped, overflow)
				}
				after := a.snapshot(t, b)
				if overflow {
					if !slices.Equal(after, before) {
						t.Errorf("step %d (overflow): weights or optimizer state changed", step)
					}
					if s.Scale() != scaleBefore/2 || sched.LR() != lrBefore || a.step != tBefore {
						t.Errorf("step %d (overflow): scale %v→%v, LR %v→%v, AdamW t %d→%d; want the scale halved, LR and t unchanged",
							step, scaleBefore, s.Scale(), lrBefore, sched.LR(), tBefore, a.step)
					}
					if !math.IsInf(norm, 1) {
						t.Errorf("step %d (overflow): grad norm %v, want +Inf", step, norm)
					}
				} else if slices.Equal(after[:p], before[:p]) {
					t.Errorf("step %d: the weights did not change", step)
				}
			}
			return a.snapshot(t, b)
		}
		withOverflow := train(t, steps, k)
		reference := train(t, steps-1, -1) // the same clean gradients, never an overflow
		if !slices.Equal(withOverflow, reference) {
			t.Errorf("after %d iterations with an overflow at %d, weights and optimizer state differ from %d clean steps", steps, k, steps-1)
		}
	})
}
