package trainer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"

	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/jsonerr"
)

// TrainerStateName is the file holding TrainerState, in output_dir and in every checkpoint (transformers'
// TRAINER_STATE_NAME).
const TrainerStateName = "trainer_state.json"

// LogEntry is one entry of log_history and one line of metrics.jsonl: {"loss": ..., "grad_norm": ...,
// "learning_rate": ..., "epoch": ..., "step": ...} for a training log, {"eval_loss": ..., "eval_accuracy": ...,
// ...} for an evaluation. Keys are written sorted; a non-finite value (the grad_norm of an FP16 step that
// overflowed) is written as null, and null reads back as NaN, so the file stays standard JSON (transformers
// writes Python's non-standard NaN/Infinity tokens there).
type LogEntry map[string]float64

// MarshalJSON writes the entry with sorted keys and non-finite values as null.
func (l LogEntry) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys(l) {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		v := l[k]
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b.WriteString("null")
			continue
		}
		b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an entry written by MarshalJSON (or by transformers, minus its NaN tokens); null becomes
// NaN and non-numeric values are skipped.
func (l *LogEntry) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	out := make(LogEntry, len(raw))
	for k, v := range raw {
		if string(v) == "null" {
			out[k] = math.NaN()
			continue
		}
		var f float64
		if json.Unmarshal(v, &f) == nil {
			out[k] = f
		}
	}
	*l = out
	return nil
}

// keys returns m's keys sorted.
func keys[M ~map[string]V, V any](m M) []string { return slices.Sorted(maps.Keys(m)) }

// TrainerState is trainer_state.json, with transformers' keys (_save_checkpoint in transformers' trainer.py) so that tools reading HF's file read
// tune's. Fields are declared in the sorted key order transformers writes.
type TrainerState struct {
	// BestGlobalStep is the step of the best evaluation of metric_for_best_model; nil (null) before one.
	BestGlobalStep *int `json:"best_global_step"`
	// BestMetric is metric_for_best_model's best value so far; nil before the first evaluation, and always
	// without metric_for_best_model and load_best_model_at_end (as transformers).
	BestMetric *float64 `json:"best_metric"`
	// BestModelCheckpoint is the checkpoint directory saved at BestGlobalStep; nil until it is saved.
	BestModelCheckpoint *string `json:"best_model_checkpoint"`
	// Epoch is fractional: epochs done plus the share of the current one.
	Epoch float64 `json:"epoch"`
	// EvalSteps is the evaluation interval in optimizer steps, resolved from eval_steps (or logging_steps).
	EvalSteps int `json:"eval_steps"`
	// GlobalStep counts optimizer steps, FP16-skipped ones included.
	GlobalStep int `json:"global_step"`
	// IsHyperParamSearch is always false: tune runs no hyperparameter search.
	IsHyperParamSearch bool `json:"is_hyper_param_search"`
	// IsLocalProcessZero and IsWorldProcessZero are always true: tune trains in one process.
	IsLocalProcessZero bool `json:"is_local_process_zero"`
	IsWorldProcessZero bool `json:"is_world_process_zero"`
	// LogHistory holds every log and evaluation entry, in order.
	LogHistory []LogEntry `json:"log_history"`
	// LoggingSteps is the logging interval in optimizer steps, resolved from logging_steps.
	LoggingSteps int `json:"logging_steps"`
	// MaxSteps is the number of optimizer steps the run takes in all (max_steps, else
	// ceil(num_train_epochs × optimizer steps per epoch); TrainingArguments.TotalSteps).
	MaxSteps int `json:"max_steps"`
	// NumInputTokensSeen counts the non-padding training tokens seen so far.
	NumInputTokensSeen int64 `json:"num_input_tokens_seen"`
	// NumTrainEpochs is the number of epochs the run spans (rounded up: a partial last epoch counts).
	NumTrainEpochs int `json:"num_train_epochs"`
	// SaveSteps is the checkpoint interval in optimizer steps, resolved from save_steps.
	SaveSteps int `json:"save_steps"`
	// StatefulCallbacks holds each StatefulCallback's state under its Name, and the TrainerControl flags.
	StatefulCallbacks map[string]CallbackState `json:"stateful_callbacks"`
	// TotalFlos is 0: tune does not count FLOPs (a resumed run keeps the value its checkpoint holds).
	TotalFlos float64 `json:"total_flos"`
	// TrainBatchSize is per_device_train_batch_size.
	TrainBatchSize int `json:"train_batch_size"`
	// TrialName and TrialParams are always null: tune runs no hyperparameter search.
	TrialName   *string        `json:"trial_name"`
	TrialParams map[string]any `json:"trial_params"`
}

// Save writes s as indented JSON to path (through a temporary file and a rename).
func (s *TrainerState) Save(path string) error { return writeJSON(path, s) }

// The most bytes LoadTrainerState reads: StateBaseBytes, plus StateBytesPerStep for each step of the run that
// reads the file. Each entry of log_history as Save indents it takes 130 bytes (a training log) to 330 (an
// evaluation with a classifier's metrics: 520 bytes a step at logging_steps 1 with an evaluation each step), and
// a step logs at most a training log, an evaluation and a skipped-step entry; the base covers the final
// summary and a checkpoint of a longer run resumed with a lower max_steps (some 100,000 entries).
const (
	StateBaseBytes    = 16 << 20
	StateBytesPerStep = 2 << 10
)

// maxLogKeys bounds the values of one log_history entry: a run logs a dozen (an evaluation's metrics with
// epoch and step).
const maxLogKeys = 1024

// LoadTrainerState reads a trainer_state.json for a run of maxSteps optimizer steps (0 when unknown). Memory
// follows the run, not the file: a file larger than StateBaseBytes + maxSteps × StateBytesPerStep is refused
// before it is read, a bad-input error naming it and its size (a resume decoded the whole of it, so an
// edited or wrong file of gigabytes took as much memory again). The state is then checked as a run writes it
// (checkState): global_step and epoch within bounds, each log_history entry with its step, at most
// global_step.
func LoadTrainerState(path string, maxSteps int) (*TrainerState, error) {
	limit := int64(StateBaseBytes) + int64(max(maxSteps, 0))*StateBytesPerStep
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > limit {
		return nil, stateTooLarge(path, fi.Size(), limit, maxSteps)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("trainer: %s: %w", path, err)
	}
	if int64(len(data)) > limit { // it grew since the Stat
		return nil, stateTooLarge(path, int64(len(data)), limit, maxSteps)
	}
	var s TrainerState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, badinput.Errorf("trainer: %w; it is not a trainer_state.json a run wrote (edited, or another "+
			"program's): resume from another checkpoint, or start a new run", jsonerr.Wrap(path, data, err))
	}
	if err := s.check(); err != nil {
		return nil, badinput.Errorf("trainer: %s: %w; it is not a trainer_state.json a run wrote (edited, or another "+
			"program's): resume from another checkpoint, or start a new run", path, err)
	}
	return &s, nil
}

// stateTooLarge is LoadTrainerState's error for a file of size bytes above limit.
func stateTooLarge(path string, size, limit int64, maxSteps int) error {
	return badinput.Errorf("trainer: %s is %d bytes, more than the %d a trainer_state.json of a run of %d steps "+
		"takes (%d MiB, and %d bytes a step for log_history): it was not written by such a run (edited, or another "+
		"file); resume from another checkpoint, or start a new run", path, size, limit, maxSteps, StateBaseBytes>>20,
		StateBytesPerStep)
}

// check returns what makes s unlike the state a run writes: a global_step below 0 or above MaxStepCount, an
// epoch that is negative, a log_history entry without a finite whole step in [0, global_step] or with more than
// maxLogKeys values.
func (s *TrainerState) check() error {
	if s.GlobalStep < 0 || float64(s.GlobalStep) > MaxStepCount {
		return fmt.Errorf("global_step %d is not a step count (0 to %.0e)", s.GlobalStep, float64(MaxStepCount))
	}
	if !(s.Epoch >= 0) {
		return fmt.Errorf("epoch %g is negative", s.Epoch)
	}
	for i, l := range s.LogHistory {
		step, ok := l["step"]
		switch {
		case l == nil:
			return fmt.Errorf("log_history[%d] is null, not an entry", i)
		case !ok:
			return fmt.Errorf("log_history[%d] has no step", i)
		case !(step >= 0 && step <= float64(s.GlobalStep)) || step != math.Trunc(step):
			return fmt.Errorf("log_history[%d] has step %g, not a step of a run at global_step %d", i, step, s.GlobalStep)
		case len(l) > maxLogKeys:
			return fmt.Errorf("log_history[%d] has %d values, more than the %d a log entry may have", i, len(l), maxLogKeys)
		}
	}
	return nil
}

// writeFileAtomic writes data to path (mode 0644) through atomicfile, so a reader (or a crash) never sees half a
// file.
func writeFileAtomic(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	return nil
}
