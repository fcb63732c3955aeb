package trainer

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// ErrNonFinite is wrapped by every *NonFiniteError: training stopped on an inf or NaN it cannot get past.
var ErrNonFinite = errors.New("non-finite values in training")

// What a NonFiniteError found non-finite.
const (
	NonFiniteLoss     = "loss"          // a micro-batch's loss
	NonFiniteGradient = "gradient"      // a parameter's gradient in an fp32 or bf16 run (no loss scaling to skip it)
	NonFiniteSkipped  = "skipped steps" // max_consecutive_skipped_steps fp16 steps in a row skipped by the GradScaler
	NonFiniteWeights  = "weights"       // a parameter's value, before training or at a save
)

// NonFiniteError reports why a run stopped on a non-finite value, and where. Train returns it (wrapping
// ErrNonFinite) when the run cannot make progress:
//
//   - a micro-batch's loss is inf or NaN, in any precision: the loss scale enters only the backward, so no
//     backoff can repair a forward that overflows (PyTorch would go on with NaN gradients and skip every step);
//   - in an fp32 or bf16 run a gradient holds an inf or NaN: there is no GradScaler to skip the step, and the
//     optimizer would write it into the weights;
//   - in an fp16 run MaxConsecutiveSkippedSteps steps in a row were skipped (PyTorch's skip-and-back-off for
//     occasional overflows is kept below that);
//   - the weights are non-finite before training (a corrupt checkpoint) or when a checkpoint or the final
//     model would be written: nothing is written, and the last good checkpoint stays as it was.
type NonFiniteError struct {
	Step      int     // the global step being computed (1-based); for weights at a save, the step just trained
	What      string  // NonFiniteLoss, NonFiniteGradient, NonFiniteSkipped or NonFiniteWeights
	Param     string  // Hugging Face name of the first parameter whose gradient or value is non-finite ("" if none)
	Index     int     // the flat index of that element in Param
	Value     float32 // the non-finite value (the loss for NonFiniteLoss)
	Scale     float32 // the loss scale of the step (1 without fp16 loss scaling)
	Precision string  // "fp16", "bf16" or "no", as TrainingArguments.MixedPrecision
	Detail    string  // what else was found (where the weights stand, the skip count, ...)
	Hint      string  // what to try
	// Loaded is set when the weights were non-finite as loaded, before any step: the input is corrupt and must
	// change (a bad-input error, exit status 2), where a run that diverges may go on from an earlier checkpoint.
	Loaded bool
}

// BadInput reports whether the error is the input's (the loaded weights), for the exit status (badinput.Is).
func (e *NonFiniteError) BadInput() bool { return e.Loaded }

// Error reads "trainer: step 12: the loss is NaN (fp16, loss scale 65536): DETAIL; HINT"; an fp32 or bf16 run,
// which has no loss scale, reads "(fp32)" or "(bf16)".
func (e *NonFiniteError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trainer: step %d: ", e.Step)
	switch e.What {
	case NonFiniteLoss:
		fmt.Fprintf(&b, "the loss is %v", e.Value)
	case NonFiniteGradient:
		if e.Param == "" { // a deferred read knows only the norm (deferred.go)
			fmt.Fprintf(&b, "the gradient norm is %v", e.Value)
		} else {
			fmt.Fprintf(&b, "the gradient of %s is %v (element %d)", e.Param, e.Value, e.Index)
		}
	case NonFiniteSkipped:
		b.WriteString("the GradScaler skipped too many steps in a row")
	case NonFiniteWeights:
		fmt.Fprintf(&b, "the weights of %s are %v (element %d)", e.Param, e.Value, e.Index)
	}
	switch e.Precision {
	case "fp16":
		fmt.Fprintf(&b, " (fp16, loss scale %v)", e.Scale)
	case "no", "":
		b.WriteString(" (fp32)")
	default:
		fmt.Fprintf(&b, " (%s)", e.Precision)
	}
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	if e.Hint != "" {
		b.WriteString("; " + e.Hint)
	}
	return b.String()
}

// Unwrap returns ErrNonFinite.
func (e *NonFiniteError) Unwrap() error { return ErrNonFinite }

// NonFiniteHinter is implemented by a model whose own configuration can cause a non-finite loss or gradient
// (lora.Model: an adapter scaling far above the usual range). NonFiniteHint returns what to change, or "" when
// nothing in the configuration is suspect; a NonFiniteError's hint then leads with it instead of pointing at
// the data.
type NonFiniteHinter interface {
	// NonFiniteHint returns what to change in the model's configuration, or "".
	NonFiniteHint() string
}

// hint returns fallback, or the model's NonFiniteHint before the debug hint when it has one.
func (t *Trainer) hint(fallback string) string {
	if h, ok := t.model.(NonFiniteHinter); ok {
		if s := h.NonFiniteHint(); s != "" {
			return s + "; " + debugHint
		}
	}
	return fallback
}

// nonFinite is a non-finite element of a named tensor.
type nonFinite struct {
	name  string
	index int
	value float32
}

// FirstNonFiniteWeight returns the first of m's parameters (in NamedParameters order) whose value holds an inf
// or NaN, the element and its value; found is false when every weight is finite. eval and predict ask it when
// the logits come out non-finite, to tell a corrupt model (bad input) from an overflow.
func FirstNonFiniteWeight(m Model) (name string, index int, value float32, found bool, err error) {
	bad, found, _, err := firstNonFinite(m.Backend(), m.NamedParameters(), false)
	return bad.name, bad.index, bad.value, found, err
}

// isFinite reports whether x is neither inf nor NaN.
func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// firstNonFinite returns the first parameter (in NamedParameters order) whose gradient (grads) or value holds
// an inf or NaN, with the element, downloading each tensor; ok is false when every one is finite. largest is
// the largest finite magnitude seen and where, for messages about weights that grew without overflowing.
func firstNonFinite(b tensor.Backend, params []NamedParam, grads bool) (bad nonFinite, ok bool, largest nonFinite, err error) {
	var host []float32
	for _, p := range params {
		t := p.Value
		if grads {
			t = p.Grad
		}
		if t == nil {
			continue
		}
		host = append(host[:0], make([]float32, t.Numel())...)
		if err := b.Download(host, t); err != nil {
			return bad, false, largest, fmt.Errorf("trainer: reading %s: %w", p.Name, err)
		}
		for i, x := range host {
			switch {
			case !isFinite(float64(x)):
				return nonFinite{p.Name, i, x}, true, largest, nil
			case math.Abs(float64(x)) > math.Abs(float64(largest.value)):
				largest = nonFinite{p.Name, i, x}
			}
		}
	}
	return bad, false, largest, nil
}

// weightsFinite reports whether every F32 tensor of ts is finite, in one fused device pass
// (NonFiniteCheckAndUnscale with inv_scale 1 only checks), downloading only tensors of other dtypes.
func weightsFinite(b tensor.Backend, ts []*tensor.Tensor) (bool, error) {
	var f32 []*tensor.Tensor
	for _, t := range ts {
		if t == nil {
			continue
		}
		if t.DType == tensor.F32 {
			f32 = append(f32, t)
			continue
		}
		host := make([]float32, t.Numel())
		if err := b.Download(host, t); err != nil {
			return false, err
		}
		for _, x := range host {
			if !isFinite(float64(x)) {
				return false, nil
			}
		}
	}
	if len(f32) == 0 {
		return true, nil
	}
	found, err := b.NonFiniteCheckAndUnscale(f32, 1)
	return !found, err
}

// lastCheckpointNote names the newest checkpoint in output_dir, which a stopped run leaves as it was.
func (t *Trainer) lastCheckpointNote() string {
	dir, err := ResolveCheckpoint(t.args.OutputDir, "latest")
	if err != nil {
		return "no checkpoint was written"
	}
	return "the last good checkpoint, " + filepath.Base(dir) + ", is kept"
}

// newNonFinite fills the fields every NonFiniteError shares.
func (t *Trainer) newNonFinite(step int, what string) *NonFiniteError {
	return &NonFiniteError{Step: step, What: what, Scale: t.run.scale, Precision: t.args.MixedPrecision()}
}

// debugHint is the hint's common ending.
const debugHint = "`tune debug nan RECIPE` runs one step with per-module checks and names the first module that turns non-finite"

// lossError explains a non-finite loss of micro-batch i (of n) of the current step, looking at the weights
// to tell a diverged update from a bad forward.
func (t *Trainer) lossError(loss float32, i, n int, b *loaders.Batch) error {
	return t.lossErrorAt(t.state.GlobalStep+1, t.run.lr, loss, i, n, b)
}

// lossErrorAt is lossError for micro-batch i of n of step (1-based), whose previous step ran at learning rate
// lr: the step of a deferred read (deferred.go) is not the current one.
func (t *Trainer) lossErrorAt(step int, lr float64, loss float32, i, n int, b *loaders.Batch) error {
	e := t.newNonFinite(step, NonFiniteLoss)
	e.Value = loss
	bad, found, largest, err := firstNonFinite(t.model.Backend(), t.model.NamedParameters(), false)
	if err != nil {
		return err
	}
	where := fmt.Sprintf("micro-batch %d of %d", i+1, n)
	for r, v := range b.Targets {
		if !isFinite(float64(v)) {
			e.Detail = fmt.Sprintf("%s has the regression target %v in row %d: the training data holds a non-finite value; %s", where, v, r+1, t.lastCheckpointNote())
			e.Hint = "remove or fix that example in the training file"
			return e
		}
	}
	switch {
	case found:
		e.Param, e.Index = bad.name, bad.index
		e.Detail = fmt.Sprintf("%s; the weights are non-finite: %s[%d] = %v, so an earlier update (learning_rate %g at step %d) diverged; %s",
			where, bad.name, bad.index, bad.value, lr, step-1, t.lastCheckpointNote())
		e.Hint = "lower learning_rate, keep max_grad_norm clipping on, add warmup_steps, and resume from the last good checkpoint"
	case step-1 > t.run.startStep && math.Abs(float64(largest.value)) > 1e4:
		e.Detail = fmt.Sprintf("%s; the weights are finite but large (|%s[%d]| = %.3g): the updates are diverging; %s",
			where, largest.name, largest.index, math.Abs(float64(largest.value)), t.lastCheckpointNote())
		e.Hint = fmt.Sprintf("lower learning_rate (%g, scheduled %g at this step), keep max_grad_norm clipping on, add warmup_steps",
			t.args.LearningRate, lr)
	default:
		e.Detail = fmt.Sprintf("%s; the weights are finite, so the forward pass produces it (the data, or an overflow); %s", where, t.lastCheckpointNote())
		e.Hint = "check the data for bad values; " + debugHint
		if t.args.FP16 {
			e.Hint = "try bf16 (FP16 overflows above 65504, and the loss scale cannot help a forward overflow), check the data for bad values; " + debugHint
		}
		e.Hint = t.hint(e.Hint)
	}
	return e
}

// gradientError explains an fp32/bf16 step whose gradient norm is non-finite, naming the parameter; it returns
// nil when every gradient is finite (only their norm overflowed FP32, which clipping handles).
func (t *Trainer) gradientError() error {
	bad, found, _, err := firstNonFinite(t.model.Backend(), t.model.NamedParameters(), true)
	if err != nil || !found {
		return err
	}
	e := t.newNonFinite(t.state.GlobalStep+1, NonFiniteGradient)
	e.Param, e.Index, e.Value = bad.name, bad.index, bad.value
	e.Detail = fmt.Sprintf("without fp16 loss scaling there is no skipping such a step, and the optimizer would write it into the weights; the step was not taken and %s", t.lastCheckpointNote())
	e.Hint = t.hint("lower learning_rate, keep max_grad_norm clipping on, check the data; " + debugHint)
	return e
}

// skippedStep records an fp16 step the GradScaler skipped: it names the first non-finite gradient in a
// warning and in metrics.jsonl, and stops the run (a NonFiniteError) at max_consecutive_skipped_steps.
func (t *Trainer) skippedStep() error {
	bad, found, _, err := firstNonFinite(t.model.Backend(), t.model.NamedParameters(), true)
	if err != nil {
		return err
	}
	if !found {
		return t.reportSkipped(t.state.GlobalStep+1, t.state.Epoch, nil)
	}
	return t.reportSkipped(t.state.GlobalStep+1, t.state.Epoch, &bad)
}

// reportSkipped is skippedStep for step (TrainerState.Epoch epoch before it), after the GradScaler's update:
// bad is the first non-finite gradient, nil when unknown (a deferred step's gradients are gone).
func (t *Trainer) reportSkipped(step int, epoch float64, bad *nonFinite) error {
	r := &t.run
	r.consecutiveSkips++
	r.skippedTotal++
	what := "a gradient"
	if bad != nil {
		what = fmt.Sprintf("the gradient of %s (%v at element %d)", bad.name, bad.value, bad.index)
	}
	next := t.scaler.Scale()
	t.logger.Warn(fmt.Sprintf("step %d: %s is non-finite under loss scale %v: step skipped, the scale backs off to %v (%d in a row)",
		step, what, r.scale, next, r.consecutiveSkips))
	entry := LogEntry{"step": float64(step), "epoch": epoch, "loss_scale": float64(r.scale),
		"next_loss_scale": float64(next), "skipped": 1, "consecutive_skipped_steps": float64(r.consecutiveSkips)}
	if err := newJSONLWriter(t.args.OutputDir).OnLog(nil, entry); err != nil {
		return err
	}
	limit := t.args.MaxConsecutiveSkippedSteps
	if limit <= 0 || r.consecutiveSkips < limit {
		return nil
	}
	e := t.newNonFinite(step, NonFiniteSkipped)
	if bad != nil {
		e.Param, e.Index, e.Value = bad.name, bad.index, bad.value
	}
	e.Scale = next
	e.Detail = fmt.Sprintf("%d steps in a row (max_consecutive_skipped_steps) had non-finite gradients, the last in %s, while the loss scale fell to %v; an overflow that no loss scale removes comes from the forward or from true gradients beyond FP16's 65504; %s",
		r.consecutiveSkips, what, next, t.lastCheckpointNote())
	e.Hint = "try bf16, a lower learning_rate or max_grad_norm clipping; max_consecutive_skipped_steps sets the limit (0 never stops); " + debugHint
	return e
}

// checkWeights returns a NonFiniteError when a parameter value is inf or NaN: all parameters (frozen ones
// too) before training, the trainable ones before a save. action says what is refused.
func (t *Trainer) checkWeights(all bool, action string) error {
	var ts []*tensor.Tensor
	params := t.model.NamedParameters()
	if all {
		for _, p := range params {
			ts = append(ts, p.Value)
		}
	} else {
		w, _, _ := t.model.Trainable()
		ts = append(ts, w)
	}
	ok, err := weightsFinite(t.model.Backend(), ts)
	if err != nil {
		return fmt.Errorf("trainer: checking the weights: %w", err)
	}
	if ok {
		return nil
	}
	bad, found, _, err := firstNonFinite(t.model.Backend(), params, false)
	if err != nil {
		return err
	}
	step := t.state.GlobalStep
	if all {
		step++ // the step that did not start
	}
	e := t.newNonFinite(step, NonFiniteWeights)
	if found {
		e.Param, e.Index, e.Value = bad.name, bad.index, bad.value
	}
	e.Detail = action + "; " + t.lastCheckpointNote()
	if all {
		e.Loaded = true
		e.Detail = action + ", and nothing was written"
		e.Hint = "the checkpoint the model was loaded from is corrupt (a diverged run saved by another tool?): load an earlier checkpoint or the original model; `tune debug nan --model DIR` lists every non-finite tensor"
	} else {
		e.Hint = "the last optimizer steps diverged: lower learning_rate, keep max_grad_norm clipping on, add warmup_steps; " + debugHint
	}
	return e
}

// checkScalerState makes sure the GradScaler state a checkpoint is about to hold loads back.
func (t *Trainer) checkScalerState() error {
	st := t.scaler.StateDict()
	probe, err := amp.NewGradScaler(t.model.Backend(), amp.DefaultGradScalerOptions())
	if err == nil {
		err = probe.LoadStateDict(st)
	}
	if err != nil {
		return fmt.Errorf("trainer: refusing to write a GradScaler state that cannot be loaded back (%+v): %w", st, err)
	}
	return nil
}
