package trainer

import (
	"fmt"
	"math"
)

// TrainerControl holds the decisions the training loop acts on after each step and epoch (transformers'
// TrainerControl). Callbacks set its flags; the loop clears each one when it has acted on it.
type TrainerControl struct {
	ShouldTrainingStop bool `json:"should_training_stop"` // end training after the current step (not cleared)
	ShouldEpochStop    bool `json:"should_epoch_stop"`    // end the current epoch after this step
	ShouldSave         bool `json:"should_save"`          // write checkpoint-<global_step> after this step
	ShouldEvaluate     bool `json:"should_evaluate"`      // evaluate on the eval dataset after this step
	ShouldLog          bool `json:"should_log"`           // log the window's loss, grad_norm and learning_rate
}

// Event is what every Callback method receives: the run's arguments, its state and the control flags a callback
// may set, and the model being trained. Callbacks must not modify Args.
type Event struct {
	Args    *TrainingArguments // the run's arguments, read-only
	State   *TrainerState      // global_step, epoch, log_history, best_metric, ... as of this event
	Control *TrainerControl    // the flags the loop acts on next; set them to steer it
	Model   Model              // the model being trained (its weights are current at this event)
}

// Callback observes and steers the training loop at the points transformers' TrainerCallback does. Embed
// CallbackBase to implement only the methods you need. An error returned by a callback stops training, and
// Train returns it.
//
// Order within one optimizer step: OnStepBegin, the micro-batches, the optimizer step, OnStepEnd (the default
// flow sets ShouldLog/ShouldEvaluate/ShouldSave here), then OnLog, OnEvaluate, OnSave as the flags ask.
type Callback interface {
	OnTrainBegin(e *Event) error // once, before the first step (after a resume's state is restored)
	OnTrainEnd(e *Event) error   // once, after load_best_model_at_end and the final trainer_state.json
	OnEpochBegin(e *Event) error // before an epoch's first step (also when resuming mid-epoch)
	OnEpochEnd(e *Event) error   // after an epoch's last step; the default flow sets the epoch strategies' flags
	OnStepBegin(e *Event) error  // before an optimizer step's micro-batches
	OnStepEnd(e *Event) error    // after the optimizer step; State.GlobalStep counts it
	// OnEvaluate receives the eval metrics with their "eval_" prefix.
	OnEvaluate(e *Event, metrics map[string]float64) error
	// OnLog receives one log_history entry (loss, grad_norm, learning_rate, ... with epoch and step).
	OnLog(e *Event, logs LogEntry) error
	// OnSave is called after a checkpoint was written to dir.
	OnSave(e *Event, dir string) error
}

// CallbackBase implements every Callback method as a no-op; embed it in a callback.
type CallbackBase struct{}

// OnTrainBegin does nothing.
func (CallbackBase) OnTrainBegin(*Event) error { return nil }

// OnTrainEnd does nothing.
func (CallbackBase) OnTrainEnd(*Event) error { return nil }

// OnEpochBegin does nothing.
func (CallbackBase) OnEpochBegin(*Event) error { return nil }

// OnEpochEnd does nothing.
func (CallbackBase) OnEpochEnd(*Event) error { return nil }

// OnStepBegin does nothing.
func (CallbackBase) OnStepBegin(*Event) error { return nil }

// OnStepEnd does nothing.
func (CallbackBase) OnStepEnd(*Event) error { return nil }

// OnEvaluate does nothing.
func (CallbackBase) OnEvaluate(*Event, map[string]float64) error { return nil }

// OnLog does nothing.
func (CallbackBase) OnLog(*Event, LogEntry) error { return nil }

// OnSave does nothing.
func (CallbackBase) OnSave(*Event, string) error { return nil }

// CallbackState is a stateful callback's entry in trainer_state.json's stateful_callbacks, as transformers
// stores it: the constructor arguments and the attributes that change during training.
type CallbackState struct {
	Args       map[string]any `json:"args"`       // constructor arguments: {"early_stopping_patience": 3, ...}
	Attributes map[string]any `json:"attributes"` // mutable state: {"early_stopping_patience_counter": 1}
}

// StatefulCallback is a Callback whose state is saved in checkpoints and restored on resume (transformers'
// ExportableState), under its Name.
type StatefulCallback interface {
	Callback
	Name() string                     // the key in stateful_callbacks: "EarlyStoppingCallback"
	State() CallbackState             // the state to save in the next checkpoint
	LoadState(st CallbackState) error // restores a saved state on resume; an error names what does not fit
}

// defaultFlow sets the control flags from the logging, eval and save strategies (transformers'
// DefaultFlowCallback); the Trainer installs it first.
type defaultFlow struct {
	CallbackBase
	logEvery, evalEvery, saveEvery int // resolved intervals in optimizer steps
}

// OnStepEnd asks for a log, an evaluation and a save at the configured step intervals, and stops training at
// max_steps, saving there whatever the interval (as transformers ≥ 4.38 does) unless save_strategy is no.
func (f *defaultFlow) OnStepEnd(e *Event) error {
	a, s, c := e.Args, e.State, e.Control
	if s.GlobalStep == 1 && a.LoggingFirstStep {
		c.ShouldLog = true
	}
	if a.LoggingStrategy == IntervalSteps && s.GlobalStep%f.logEvery == 0 {
		c.ShouldLog = true
	}
	if a.EvalStrategy == IntervalSteps && s.GlobalStep%f.evalEvery == 0 {
		c.ShouldEvaluate = true
	}
	if a.SaveStrategy == IntervalSteps && s.GlobalStep%f.saveEvery == 0 {
		c.ShouldSave = true
	}
	if s.GlobalStep >= s.MaxSteps {
		c.ShouldTrainingStop = true
		if a.SaveStrategy != IntervalNo {
			c.ShouldSave = true
		}
	}
	return nil
}

// OnEpochEnd asks for a log, an evaluation and a save under the epoch strategies.
func (f *defaultFlow) OnEpochEnd(e *Event) error {
	a, c := e.Args, e.Control
	c.ShouldLog = c.ShouldLog || a.LoggingStrategy == IntervalEpoch
	c.ShouldEvaluate = c.ShouldEvaluate || a.EvalStrategy == IntervalEpoch
	c.ShouldSave = c.ShouldSave || a.SaveStrategy == IntervalEpoch
	return nil
}

// EarlyStopping stops training when the eval metric (metric_for_best_model) has not improved on the best one
// by more than Threshold for Patience evaluations in a row (transformers' EarlyStoppingCallback). It compares
// each evaluation with state.best_metric as it stood before that evaluation. The Trainer installs it when
// early_stopping_patience > 0; its counter is saved in checkpoints.
type EarlyStopping struct {
	CallbackBase
	Patience  int     // early_stopping_patience: evaluations without improvement before stopping, ≥ 1
	Threshold float64 // early_stopping_threshold: the least |metric − best| that counts as improvement
	// Counter is the number of evaluations in a row without improvement.
	Counter int
}

var _ StatefulCallback = (*EarlyStopping)(nil)

// Name returns "EarlyStoppingCallback", transformers' key in stateful_callbacks.
func (*EarlyStopping) Name() string { return "EarlyStoppingCallback" }

// OnEvaluate updates the counter and stops training when it reaches Patience. A missing metric is an error
// naming the metrics that exist.
func (es *EarlyStopping) OnEvaluate(e *Event, metrics map[string]float64) error {
	key := "eval_" + e.Args.BestMetric()
	v, ok := metrics[key]
	if !ok {
		return fmt.Errorf("trainer: early stopping watches %q but the evaluation returned %v; set metric_for_best_model to one of them", key, keys(metrics))
	}
	best := e.State.BestMetric
	improved := best == nil || (isBetter(v, *best, e.Args.IsGreaterBetter()) && math.Abs(v-*best) > es.Threshold)
	if improved {
		es.Counter = 0
	} else {
		es.Counter++
	}
	if es.Counter >= es.Patience {
		e.Control.ShouldTrainingStop = true
	}
	return nil
}

// State returns the patience, threshold and counter.
func (es *EarlyStopping) State() CallbackState {
	return CallbackState{
		Args:       map[string]any{"early_stopping_patience": es.Patience, "early_stopping_threshold": es.Threshold},
		Attributes: map[string]any{"early_stopping_patience_counter": es.Counter},
	}
}

// LoadState restores the counter.
func (es *EarlyStopping) LoadState(st CallbackState) error {
	v, ok := st.Attributes["early_stopping_patience_counter"]
	if !ok {
		return nil
	}
	f, ok := v.(float64) // encoding/json's number type
	if !ok {
		if i, isInt := v.(int); isInt {
			f = float64(i)
		} else {
			return fmt.Errorf("trainer: EarlyStoppingCallback state: early_stopping_patience_counter is %T, want a number", v)
		}
	}
	es.Counter = int(f)
	return nil
}

// isBetter reports whether v beats best in the given direction.
func isBetter(v, best float64, greater bool) bool {
	if greater {
		return v > best
	}
	return v < best
}
