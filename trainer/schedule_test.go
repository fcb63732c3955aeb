package trainer

import (
	"math"
	"testing"
)

func TestLRSchedulerValues(t *testing.T) {
	// Expected values: transformers/optimization.py (the W=1, T=4 linear row was verified with transformers 5.17) and the formulas
	// evaluated by hand.
	tests := []struct {
		name          string
		typ           string
		base          float64
		warmup, total int
		want          []float64 // LR of optimizer steps 0, 1, 2, ...
	}{
		{"linear W=1 T=4 is the verified 0, 5e-5, 3.33e-5, 1.67e-5", ScheduleLinear, 5e-5, 1, 4, []float64{0, 5e-5, 5e-5 * 2 / 3, 5e-5 / 3}},
		{"linear without warmup starts at the base LR and reaches 0 at T", ScheduleLinear, 1, 0, 4, []float64{1, 0.75, 0.5, 0.25, 0, 0}},
		{"constant ignores warmup", ScheduleConstant, 2e-5, 3, 10, []float64{2e-5, 2e-5, 2e-5, 2e-5}},
		{"constant_with_warmup ramps then stays", ScheduleConstantWithWarmup, 1, 2, 10, []float64{0, 0.5, 1, 1, 1}},
		{"cosine W=1 T=5: half a wave over 4 steps", ScheduleCosine, 1, 1, 5, []float64{0, 1, 0.5 * (1 + math.Cos(math.Pi/4)), 0.5, 0.5 * (1 + math.Cos(3*math.Pi/4)), 0}},
		{"polynomial power 1 decays linearly to lr_end and stays there", SchedulePolynomial, 1, 1, 3, []float64{0, 1, (1-1e-7)*0.5 + 1e-7, 1e-7, 1e-7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewLRScheduler(tt.typ, tt.base, tt.warmup, tt.total)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tt.want {
				if got := s.LR(); math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
					t.Errorf("step %d: LR %.10g, want %.10g", i, got, want)
				}
				s.Step()
			}
		})
	}
}

func TestLRSchedulerErrors(t *testing.T) {
	tests := []struct {
		name          string
		typ           string
		base          float64
		warmup, total int
	}{
		{"unknown schedule name", "cosine_with_restarts_typo", 1e-5, 0, 10},
		{"negative learning rate", ScheduleLinear, -1, 0, 10},
		{"infinite learning rate", ScheduleLinear, math.Inf(1), 0, 10},
		{"negative warmup", ScheduleLinear, 1e-5, -1, 10},
		{"polynomial with lr below lr_end", SchedulePolynomial, 1e-8, 0, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewLRScheduler(tt.typ, tt.base, tt.warmup, tt.total); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestLRSchedulerStateRoundTrip(t *testing.T) {
	s, _ := NewLRScheduler(ScheduleLinear, 5e-5, 1, 4)
	s.Step()
	s.Step()
	st := s.StateDict()
	if st.LastEpoch != 2 || st.StepCount != 3 || st.LastLR[0] != s.LR() {
		t.Fatalf("state %+v", st)
	}
	r, _ := NewLRScheduler(ScheduleLinear, 5e-5, 1, 4)
	if err := r.LoadStateDict(st); err != nil {
		t.Fatal(err)
	}
	if r.LR() != s.LR() {
		t.Fatalf("restored LR %g, want %g", r.LR(), s.LR())
	}
}
