package trainer

import (
	"fmt"
	"math"
	"slices"
)

// Learning-rate schedule names, as Hugging Face's SchedulerType spells them (lr_scheduler_type).
const (
	ScheduleLinear             = "linear"
	ScheduleCosine             = "cosine"
	ScheduleConstant           = "constant"
	ScheduleConstantWithWarmup = "constant_with_warmup"
	SchedulePolynomial         = "polynomial"
)

// ScheduleNames lists the schedules tune implements, in the order `tune finetune --help` shows them.
var ScheduleNames = []string{ScheduleLinear, ScheduleCosine, ScheduleConstant, ScheduleConstantWithWarmup, SchedulePolynomial}

// Defaults of the schedule parameters transformers fixes (transformers/optimization.py, v5.17).
const (
	// CosineNumCycles is get_cosine_schedule_with_warmup's num_cycles: half a cosine wave from 1 down to 0.
	CosineNumCycles = 0.5
	// PolynomialLREnd is get_polynomial_decay_schedule_with_warmup's lr_end.
	PolynomialLREnd = 1e-7
	// PolynomialPower is get_polynomial_decay_schedule_with_warmup's power (1 = linear decay to lr_end).
	PolynomialPower = 1.0
)

// LRScheduler is PyTorch's LambdaLR over one of transformers' schedule functions (transformers/optimization.py): the learning
// rate of optimizer step s (counted from 0) is BaseLR·f(s). W (Warmup) and T (Total) count optimizer steps.
//
//	linear                s < W: s/max(1,W)   else max(0, (T−s)/max(1,T−W))
//	cosine                s < W: s/max(1,W)   else max(0, 0.5·(1+cos(π·2·0.5·p))), p = (s−W)/max(1,T−W)
//	constant_with_warmup  s < W: s/max(1,W)   else 1
//	polynomial            s < W: s/max(1,W)   else ((lr0−lr_end)·(1−(s−W)/(T−W))^power + lr_end)/lr0,
//	                                          and lr_end/lr0 for s > T
//	constant              1
//
// So with W > 0 the first update uses LR 0, as in transformers. The Trainer reads LR() before an optimizer step
// (that value is the logged learning_rate) and calls Step() after it, unless the GradScaler skipped the step.
type LRScheduler struct {
	Type   string  // lr_scheduler_type: linear, cosine, constant_with_warmup, polynomial or constant
	BaseLR float64 // lr0, the optimizer's learning_rate
	Warmup int     // W, optimizer steps
	Total  int     // T, optimizer steps
	// LastEpoch is LambdaLR's last_epoch after the initial step: the number of Step() calls so far, i.e. the
	// index s of the next optimizer step.
	LastEpoch int
}

// NewLRScheduler returns the schedule typ (one of ScheduleNames) for base learning rate baseLR over total
// optimizer steps with warmup warmup steps. It errors on an unknown name, a negative count, a non-finite or
// negative baseLR, and for polynomial on baseLR <= PolynomialLREnd (transformers raises there too).
func NewLRScheduler(typ string, baseLR float64, warmup, total int) (*LRScheduler, error) {
	if !slices.Contains(ScheduleNames, typ) {
		return nil, fmt.Errorf("trainer: lr_scheduler_type %q is not supported; use one of %v", typ, ScheduleNames)
	}
	if math.IsNaN(baseLR) || math.IsInf(baseLR, 0) || baseLR < 0 {
		return nil, fmt.Errorf("trainer: learning_rate %v must be finite and >= 0", baseLR)
	}
	if warmup < 0 || total < 0 {
		return nil, fmt.Errorf("trainer: warmup steps (%d) and total steps (%d) must be >= 0", warmup, total)
	}
	if typ == SchedulePolynomial && baseLR <= PolynomialLREnd {
		return nil, fmt.Errorf("trainer: polynomial schedule needs learning_rate (%g) > lr_end (%g)", baseLR, PolynomialLREnd)
	}
	return &LRScheduler{Type: typ, BaseLR: baseLR, Warmup: warmup, Total: total}, nil
}

// Factor returns f(s), the multiplier of BaseLR at optimizer step s (from 0), per the table on LRScheduler.
func (s *LRScheduler) Factor(step int) float64 {
	if s.Type == ScheduleConstant {
		return 1
	}
	st, w, t := float64(step), float64(s.Warmup), float64(s.Total)
	if step < s.Warmup {
		return st / math.Max(1, w)
	}
	switch s.Type {
	case ScheduleLinear:
		return math.Max(0, (t-st)/math.Max(1, t-w))
	case ScheduleCosine:
		p := (st - w) / math.Max(1, t-w)
		return math.Max(0, 0.5*(1+math.Cos(math.Pi*2*CosineNumCycles*p)))
	case SchedulePolynomial:
		if step > s.Total {
			return PolynomialLREnd / s.BaseLR
		}
		// transformers divides by (T−W) here without a guard; T == W only reaches this branch at s == T,
		// where the decay is complete, so lr_end is the limit value.
		if s.Total == s.Warmup {
			return PolynomialLREnd / s.BaseLR
		}
		rem := 1 - (st-w)/(t-w)
		return ((s.BaseLR-PolynomialLREnd)*math.Pow(rem, PolynomialPower) + PolynomialLREnd) / s.BaseLR
	}
	return 1 // constant_with_warmup after warmup
}

// LR returns the learning rate the next optimizer step uses: BaseLR·f(LastEpoch).
func (s *LRScheduler) LR() float64 { return s.BaseLR * s.Factor(s.LastEpoch) }

// Step advances the schedule by one optimizer step (LambdaLR.step()).
func (s *LRScheduler) Step() { s.LastEpoch++ }

// SchedulerState is the scheduler's checkpoint (scheduler.json), with the keys of PyTorch's LambdaLR
// state_dict that carry information (_save_checkpoint in transformers' trainer.py): base_lrs, last_epoch, _step_count and _last_lr. tune adds
// the schedule's own parameters so a resume can check that they match.
type SchedulerState struct {
	BaseLRs   []float64 `json:"base_lrs"`           // [BaseLR], one per param group (tune has one)
	LastEpoch int       `json:"last_epoch"`         // LRScheduler.LastEpoch: Step() calls so far
	StepCount int       `json:"_step_count"`        // LambdaLR counts the step() in its constructor: last_epoch + 1
	LastLR    []float64 `json:"_last_lr"`           // [LR()], the rate the next optimizer step uses
	Type      string    `json:"lr_scheduler_type"`  // tune's addition: LRScheduler.Type
	Warmup    int       `json:"num_warmup_steps"`   // tune's addition: W
	Total     int       `json:"num_training_steps"` // tune's addition: T
}

// StateDict returns the scheduler's state for a checkpoint.
func (s *LRScheduler) StateDict() SchedulerState {
	return SchedulerState{
		BaseLRs: []float64{s.BaseLR}, LastEpoch: s.LastEpoch, StepCount: s.LastEpoch + 1,
		LastLR: []float64{s.LR()}, Type: s.Type, Warmup: s.Warmup, Total: s.Total,
	}
}

// LoadStateDict restores the position from st. The schedule's type, base LR, warmup and total come from the
// arguments of the resumed run, as in transformers (a resume with a different learning_rate or max_steps uses
// the new values); only last_epoch is taken from st. A negative last_epoch is an error.
func (s *LRScheduler) LoadStateDict(st SchedulerState) error {
	if st.LastEpoch < 0 {
		return fmt.Errorf("trainer: scheduler state: last_epoch %d must be >= 0", st.LastEpoch)
	}
	s.LastEpoch = st.LastEpoch
	return nil
}
