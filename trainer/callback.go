package trainer

import (
	"fmt"
	"math"
)

// TrainerControl holds the decisions the training loop acts on after each step and epoch (transformers'
// TrainerControl). Callbacks set its flags; the loop clears each one when it has acted on it.
type TrainerControl struct {
	ShouldTrainingStop bool `json:"should_training_stop"`
	ShouldEpochStop    bool `json:"should_epoch_stop"`
	ShouldSave         bool `json:"should_save"`
	ShouldEvaluate     bool `json:"should_evaluate"`
	ShouldLog          bool `json:"should_log"`
}

// Event is what every Callback method receives: the run's arguments, its state and the control flags a callback
// may set, and the model being trained. Callbacks must not modify Args.
type Event struct {
	Args    *TrainingArguments
	State   *TrainerState
	Control *TrainerControl
	Model   Model
}

// Callback observes and steers the training loop at the points transformers' TrainerCallback does. Embed
// CallbackBase to implement only the methods you need. An error returned by a callback stops training, and
// Train returns it.
//
// Order within one optimizer step: OnStepBegin, the micro-batches, the optimizer step, OnStepEnd (the default
// flow sets ShouldLog/ShouldEvaluate/ShouldSave here), then OnLog, OnEvaluate, OnSave as the flags ask.
type Callback interface {
	OnTrainBegin(e *Event) error
	OnTrainEnd(e *Event) error
	OnEpochBegin(e *Event) error
	OnEpochEnd(e *Event) error
	OnStepBegin(e *Event) error
	OnStepEnd(e *Event) error
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
	Args       map[string]any `json:"args"`
	Attributes map[string]any `json:"attributes"`
}

// StatefulCallback is a Callback whose state is saved in checkpoints and restored on resume (transformers'
// ExportableState), under its Name.
type StatefulCallback interface {
	Callback
	Name() string
	State() CallbackState
	LoadState(st CallbackState) error
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
	Patience  int
	Threshold float64
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
