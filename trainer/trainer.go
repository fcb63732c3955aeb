package trainer

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// dropoutStride is the Philox offset distance between consecutive micro-batches: micro-batch k of a run draws
// its dropout masks from offsets [k·2^36, (k+1)·2^36), far more counters than one BERT-large micro-batch of
// 64×512 tokens uses (~2^30), so no two micro-batches share random numbers and a resumed run draws the same masks.
const dropoutStride = 1 << 36

// Trainer trains, evaluates and runs a Model with transformers' Trainer semantics (transformers' trainer.py): AdamW over the
// trainable parameters, an LR schedule, gradient accumulation, clipping after unscaling, FP16 loss scaling,
// evaluation with metrics, callbacks, logging, checkpoints and exact resume. Build one with New.
//
// One optimizer step (global_step) is, with N = gradient_accumulation_steps micro-batches in the window (fewer
// at the end of an epoch):
//
//	for each micro-batch i: Forward, then Backward(seed = lossScale · n_i/Σn)   // B29: mean over the window
//	scaler.Unscale(grads)                                   // FP16 only; one fused inf/NaN check
//	grad_norm = ClipGradNorm(grads, max_grad_norm)          // once per step, after unscaling (B09, B31)
//	if finite: AdamW step with the scheduler's LR; scheduler.Step()   // skipped otherwise (B11)
//	scaler.Update(); ZeroGrad; global_step++
//
// A step the GradScaler skips still counts in global_step, as in transformers; the LR schedule does not advance
// on it and it is logged with a non-finite grad_norm. The logged loss is the window's unscaled mean, averaged
// over the steps since the last log (B15); the logged learning_rate is the LR the step used. BF16 runs have no
// scaler (their reported loss scale is 1).
//
// A Trainer is not safe for concurrent use.
type Trainer struct {
	model     Model
	args      TrainingArguments
	train     Dataset
	eval      Dataset
	user      []Callback // WithCallbacks
	callbacks []Callback // the Trainer's own, then user; set up by Train
	metrics   MetricsFunc
	out       io.Writer
	logger    *slog.Logger
	scalerOpt *amp.GradScalerOptions
	// outputs is the record of this run's outputs (OutputsName) that a fresh Train begins, until it is first
	// written (recordOutputs); nil once written, and for a run that resumes in place.
	outputs *outputsRecord
	// predictStep, when set, is told after each batch of an evaluation or prediction pass (prefix eval or test):
	// the progress display sets it.
	predictStep func(prefix string, done, total int)

	policy  amp.Policy
	opt     *AdamW
	sched   *LRScheduler
	scaler  *amp.GradScaler
	state   *TrainerState
	control TrainerControl
	run     runState
	// deferred holds the steps whose loss and gradient norm are still on the device (deferred.go); nil when
	// each step reads them at once. deferOverride, set by tests, forces the choice.
	deferred      *deferredSteps
	deferOverride *bool
	// clipInMemory, set by tests, makes the deferred steps clip the gradients in memory (a ClipByNorm pass)
	// before AdamW instead of AdamW clipping them as it reads them (tensor.AdamWArgs.GradNorm): the path the
	// folded clip must match bit for bit.
	clipInMemory bool
	// graph runs the steps as CUDA graphs (graphs.go); nil without cuda_graphs. graphRunner, set by tests,
	// stands in for cuda.NewStepGraph.
	graph       *stepGraph
	graphRunner func(tensor.Backend) graphRunner
}

// Option configures a Trainer.
type Option func(*Trainer)

// WithCallbacks adds callbacks, called after the Trainer's own (default flow, early stopping, progress,
// metrics.jsonl), in the given order.
func WithCallbacks(cbs ...Callback) Option {
	return func(t *Trainer) { t.user = append(t.user, cbs...) }
}

// WithComputeMetrics sets the function that turns eval predictions into metrics (transformers'
// compute_metrics). The default is ClassificationMetrics; nil keeps only the eval loss.
func WithComputeMetrics(f MetricsFunc) Option { return func(t *Trainer) { t.metrics = f } }

// WithOutput sets where progress goes: a progress bar when w is a terminal, one line per log entry otherwise.
// The default is os.Stdout; io.Discard (or nil) silences it.
func WithOutput(w io.Writer) Option { return func(t *Trainer) { t.out = w } }

// WithLogger sets the logger for warnings (a resumed FP16 run without scaler state, a model without full-half
// evaluation, ...). The default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(t *Trainer) { t.logger = l } }

// WithGradScalerOptions replaces the GradScaler's defaults (init_scale 65536, growth 2, backoff 0.5, interval
// 2000) for an FP16 run, as accelerate's GradScalerKwargs do. Enabled is taken from the arguments (fp16).
func WithGradScalerOptions(o amp.GradScalerOptions) Option {
	return func(t *Trainer) { t.scalerOpt = &o }
}

// New returns a Trainer for model with args, training on train and evaluating on eval. Either dataset may be nil
// when unused (Train needs train; evaluation needs eval). It validates args (errors wrap ErrInvalidArguments) and
// builds the optimizer, the GradScaler and the progress and metrics.jsonl callbacks; nothing is written until
// Train, Evaluate or Predict runs.
func New(model Model, args TrainingArguments, train, eval Dataset, opts ...Option) (*Trainer, error) {
	if model == nil {
		return nil, fmt.Errorf("trainer: New: model is nil")
	}
	if err := args.Validate(); err != nil {
		return nil, err
	}
	if train != nil && eval == nil && args.EvalStrategy != IntervalNo {
		return nil, fmt.Errorf("trainer: eval_strategy %q needs an eval dataset", args.EvalStrategy)
	}
	t := &Trainer{model: model, args: args, train: train, eval: eval, metrics: ClassificationMetrics, out: os.Stdout}
	for _, o := range opts {
		o(t)
	}
	if t.out == nil {
		t.out = io.Discard
	}
	if t.logger == nil {
		t.logger = slog.Default()
	}
	if args.GradientCheckpointing {
		gc, ok := model.(transformer.GradientCheckpointer)
		if ok {
			gc.SetGradientCheckpointing(true)
		}
		if !ok || !gc.GradientCheckpointing() {
			return nil, fmt.Errorf("trainer: gradient_checkpointing: true, but the model (%T) cannot recompute its layers; "+
				"set gradient_checkpointing: false", model)
		}
	}
	switch {
	case args.FP16:
		t.policy = amp.FP16
	case args.BF16:
		t.policy = amp.BF16
	}
	so := amp.DefaultGradScalerOptions()
	if t.scalerOpt != nil {
		so = *t.scalerOpt
	}
	so.Enabled = args.FP16
	var err error
	if t.scaler, err = amp.NewGradScaler(model.Backend(), so); err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	_, grads, _ := model.Trainable()
	if err := t.scaler.CheckGradients([]*tensor.Tensor{grads}); err != nil { // B14: fail at startup
		return nil, fmt.Errorf("trainer: %w", err)
	}
	if t.opt, err = NewAdamW(model, args.AdamBeta1, args.AdamBeta2, args.AdamEpsilon, args.WeightDecay); err != nil {
		return nil, err
	}
	return t, nil
}

// Args returns the Trainer's arguments.
func (t *Trainer) Args() TrainingArguments { return t.args }

// State returns the training state (global step, epoch, log history, best metric); nil before Train.
func (t *Trainer) State() *TrainerState { return t.state }

// Scaler returns the GradScaler (disabled unless fp16).
func (t *Trainer) Scaler() *amp.GradScaler { return t.scaler }

// Close releases the optimizer's buffers. The model is the caller's.
func (t *Trainer) Close() { t.opt.Free() }

// SaveModel writes the model (or adapter) to dir with Model.Save, creating dir. Trainable weights holding an
// inf or NaN are refused (a *NonFiniteError) and nothing is written.
func (t *Trainer) SaveModel(dir string) error {
	if t.state != nil {
		if err := t.checkWeights(false, "refusing to write the model to "+dir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	if err := t.model.Save(dir); err != nil {
		return fmt.Errorf("trainer: saving the model to %s: %w", dir, err)
	}
	return RecordOutputs(dir) // a no-op unless dir is a run's output_dir
}

// event returns the Event callbacks receive.
func (t *Trainer) event() *Event {
	return &Event{Args: &t.args, State: t.state, Control: &t.control, Model: t.model}
}

// fire calls f on every callback in order and stops at the first error.
func (t *Trainer) fire(f func(Callback, *Event) error) error {
	e := t.event()
	for _, cb := range t.callbacks {
		if err := f(cb, e); err != nil {
			return fmt.Errorf("trainer: callback %T: %w", cb, err)
		}
	}
	return nil
}

// log appends logs (with epoch and step) to log_history and hands them to the callbacks (OnLog).
func (t *Trainer) log(logs LogEntry) error {
	logs["epoch"] = t.state.Epoch
	logs["step"] = float64(t.state.GlobalStep)
	t.state.LogHistory = append(t.state.LogHistory, logs)
	t.control.ShouldLog = false
	return t.fire(func(cb Callback, e *Event) error { return cb.OnLog(e, logs) })
}
