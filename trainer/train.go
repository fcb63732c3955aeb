package trainer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/internal/dirlock"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// runState is the training loop's position and running sums.
type runState struct {
	total, stepsPerEpoch, numEpochs int // optimizer steps of the run and per epoch; epochs to run
	numMicro                        int // micro-batches per epoch

	epoch         int    // epoch of the next micro-batch (from 0)
	microDone     int    // micro-batches of that epoch already consumed
	dropoutOffset uint64 // Philox offset of the next micro-batch

	startStep           int     // global_step when this Train call began (> 0 after a resume)
	resumedWindow       int     // steps of the logging window open at the resumed checkpoint (DataState)
	resumedLoss         float64 // their summed loss
	trLoss              float64 // Σ window losses since the last log
	accSum              float64 // Σ per-micro-batch token accuracies since the last log (causal LMs)
	accN                int     // micro-batches in accSum
	totalLoss           float64 // Σ window losses of this Train call
	samples             int     // examples trained on in this Train call
	lastLogged          int     // global_step of the last training log
	lastEval, lastSaved int     // global_step of the last evaluation and checkpoint (-1: none)
	savedWithEval       bool    // the last checkpoint was written after the evaluation of its step
	lastLoss            float64 // window loss of the last step
	gradNorm            float64 // pre-clip unscaled gradient norm of the last step
	lr                  float64 // learning rate the last step used
	scale               float32 // loss scale the last step's backward used
	skippedSinceLog     int     // GradScaler-skipped steps since the last log
	consecutiveSkips    int     // GradScaler-skipped steps in a row up to the last step
	skippedTotal        int     // GradScaler-skipped steps of this Train call
	start               time.Time
}

// TrainOutput is what Train returns (transformers' TrainOutput).
type TrainOutput struct {
	GlobalStep   int     // optimizer steps taken in all, those before a resume included
	StartStep    int     // the step this call resumed from (0 for a fresh run)
	TrainingLoss float64 // mean loss per step over the run, the logged steps before a resume included
	// Metrics holds train_runtime (s), train_samples_per_second, train_steps_per_second, train_loss and epoch.
	Metrics map[string]float64
}

// Train runs the training loop to max_steps or num_train_epochs (or until a callback stops it, or ctx is
// cancelled), resuming first from args.ResumeFromCheckpoint when set ("true" or "latest" picks the newest
// checkpoint in output_dir). It writes output_dir/metrics.jsonl, checkpoints per save_strategy,
// output_dir/trainer_state.json and output_dir/training_curve.png. A cancelled ctx returns ctx's error after
// the current optimizer step; the last checkpoint stays valid.
func (t *Trainer) Train(ctx context.Context) (_ TrainOutput, err error) {
	a := &t.args
	if t.train == nil || t.train.Len() == 0 {
		return TrainOutput{}, fmt.Errorf("trainer: Train needs a non-empty training dataset")
	}
	r := &t.run
	*r = runState{lastEval: -1, lastSaved: -1}
	r.numMicro = (t.train.Len() + a.PerDeviceTrainBatchSize - 1) / a.PerDeviceTrainBatchSize
	r.total, r.numEpochs = a.TotalSteps(r.numMicro)
	r.stepsPerEpoch = (r.numMicro + a.GradientAccumulationSteps - 1) / a.GradientAccumulationSteps
	if n := a.NumTrainEpochs * float64(r.stepsPerEpoch); a.MaxSteps <= 0 && n > MaxStepCount {
		// Validate bounds num_train_epochs by MaxStepCount alone; times the steps of an epoch it can still pass
		// 2^63, where the count turns negative ("total steps (-9223372036854775808)").
		return TrainOutput{}, &ArgumentError{Key: "num_train_epochs", Reason: fmt.Sprintf("%g epochs of %d steps "+
			"make %.3g steps, more than the %.0e a run can count; lower num_train_epochs or set max_steps",
			a.NumTrainEpochs, r.stepsPerEpoch, n, float64(MaxStepCount))}
	}
	if t.sched, err = NewLRScheduler(a.LRSchedulerType, a.LearningRate, a.NumWarmupSteps(r.total), r.total); err != nil {
		return TrainOutput{}, err
	}
	t.state = t.newState(r.total, r.numEpochs)
	t.control = TrainerControl{}
	// One run per output_dir: held until Train returns (shared with a caller of this process that holds it).
	lock, err := dirlock.Acquire(a.OutputDir)
	if err != nil {
		return TrainOutput{}, fmt.Errorf("trainer: output_dir: %w", err)
	}
	defer lock.Release()
	if lock.Stale != "" {
		t.logger.Warn(lock.Stale)
	}
	if err := a.CheckOutputDir(); err != nil {
		return TrainOutput{}, err
	}
	if err := a.ClearOutputDir(); err != nil {
		return TrainOutput{}, err
	}
	if !a.resumesInPlace() {
		if kept, err := keepInterruptedLog(a.OutputDir, a.OverwriteOutputDir); err != nil {
			return TrainOutput{}, err
		} else if kept != "" {
			t.logger.Info(fmt.Sprintf("%s held only the %s of a run stopped before its first checkpoint: kept as %s; "+
				"this run starts from the beginning", a.OutputDir, MetricsName, filepath.Base(kept)))
		}
	}
	if err := os.MkdirAll(a.OutputDir, 0o755); err != nil {
		return TrainOutput{}, fmt.Errorf("trainer: output_dir: %w", err)
	}
	removeStaleTemps(a.OutputDir)
	t.outputs = startOutputs(a.OutputDir, a.resumesInPlace())
	if all, err := ScanCheckpoints(a.OutputDir); err == nil {
		for _, c := range all {
			switch {
			case c.Problem == "":
			case len(foreignCheckpointFiles(c.Dir)) > 0: // never replaced (checkForeignCheckpoints)
				t.logger.Warn("incomplete checkpoint, ignored: "+c.Problem, "checkpoint", c.Dir)
			default:
				t.logger.Warn(fmt.Sprintf("incomplete checkpoint, ignored (a save of step %d replaces it): %s",
					c.Step, c.Problem), "checkpoint", c.Dir)
			}
		}
	}
	t.setupCallbacks()
	defer func() {
		if err != nil {
			for _, cb := range t.callbacks {
				if a, ok := cb.(interface{ abort() }); ok {
					a.abort()
				}
			}
		}
	}()
	t.model.SetPolicy(t.policy)
	if fs, ok := t.model.(transformer.FrozenStorage); ok && storeFrozenHalf(*a, t.policy) {
		// Frozen projection weights (LoRA's base) live in the autocast dtype from here on: cast once, no
		// FP32 copy, no per-step cast; the GEMMs read the same rounded values the weight cache made each step.
		if err := fs.StoreFrozenIn(t.policy.DType); err != nil {
			return TrainOutput{}, fmt.Errorf("trainer: %w", err)
		}
	}
	if a.ResumeFromCheckpoint != "" {
		dir, err := ResolveCheckpoint(a.OutputDir, a.ResumeFromCheckpoint)
		if err != nil {
			return TrainOutput{}, err
		}
		if err := t.loadCheckpoint(dir); err != nil {
			return TrainOutput{}, withEarlierCheckpoint(err, a.OutputDir, dir)
		}
	}
	r.startStep, r.lastLogged = t.state.GlobalStep, t.state.GlobalStep-r.resumedWindow
	if all, err := ScanCheckpoints(a.OutputDir); err == nil {
		if err := checkForeignCheckpoints(all, r.startStep); err != nil {
			return TrainOutput{}, err
		}
	}
	if a.ResumeFromCheckpoint != "" && r.startStep >= r.total {
		if model := finalModel(a.OutputDir); model != "" && regularFile(filepath.Join(a.OutputDir, AllResultsName)) {
			return TrainOutput{}, fmt.Errorf("trainer: %w: resume_from_checkpoint %s is at step %d, the end of training (max_steps %d): "+
				"the run finished; raise max_steps or num_train_epochs to train on, or use the model saved in %s",
				ErrNothingToTrain, a.ResumeFromCheckpoint, r.startStep, r.total, model)
		}
		// A run stopped after its last checkpoint (Ctrl-C in the final evaluation: the model may be saved, but
		// not the results, which tune finetune writes last), or another run's final
		// checkpoint resumed into a new output_dir: no step is left, but the end of training is (the final
		// trainer_state.json here; the caller's save and evaluation), as transformers' Trainer.train returns at
		// once and the script saves and evaluates.
		t.logger.Info("no step left to train: finishing the run (the final save and evaluation)", "checkpoint", a.ResumeFromCheckpoint,
			"step", r.startStep, "max_steps", r.total)
	}
	r.scale = t.scaler.Scale()
	if err := t.checkWeights(true, "training did not start"); err != nil {
		return TrainOutput{}, err
	}
	if t.deferChecks() { // the steps keep their loss and gradient norm on the device (deferred.go)
		if t.deferred, err = newDeferredSteps(t.model.Backend(), a.GradientAccumulationSteps, a.PerDeviceTrainBatchSize); err != nil {
			return TrainOutput{}, err
		}
		defer func() { t.deferred.free(); t.deferred = nil }()
		if t.scaler.Enabled() { // the GradScaler on the device too (deferred16.go)
			if t.deferred.fp16, err = t.newScaledSteps(r.total - r.startStep); err != nil {
				return TrainOutput{}, err
			}
		}
	}
	if a.CUDAGraphs {
		if t.graph, err = t.newStepGraph(); err != nil {
			return TrainOutput{}, err
		}
		if t.graph != nil {
			defer func() { t.graph.report(t); t.graph.free(t.model.Backend(), t.deferred); t.graph = nil }()
		}
	}
	r.start = time.Now()
	if err := t.fire(func(cb Callback, e *Event) error { return cb.OnTrainBegin(e) }); err != nil {
		return TrainOutput{}, err
	}
	for r.epoch < r.numEpochs && t.state.GlobalStep < r.total && !t.control.ShouldTrainingStop {
		if err := t.trainEpoch(ctx); err != nil {
			return TrainOutput{}, err
		}
	}
	return t.finish(ctx)
}

// interrupted says where training stopped and how to go on: the newest complete checkpoint, which a run with
// resume_from_checkpoint continues from exactly, or that there is none. It wraps err (context.Canceled) without
// printing it: Go's "context canceled" tells the user nothing the message does not.
func (t *Trainer) interrupted(err error, at string) error {
	step := t.state.GlobalStep
	all, _ := ScanCheckpoints(t.args.OutputDir)
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Problem == "" {
			return interruptedError{fmt.Sprintf("trainer: training interrupted %s %d; %s (step %d) holds the run: resume_from_checkpoint=true "+
				"(on the tune finetune command line: training.resume_from_checkpoint=true) continues from it as if never stopped", at, step, all[i].Dir, all[i].Step), err}
		}
	}
	// What a new run there finds: only this run's metrics.jsonl, which it keeps (keepInterruptedLog), or more
	// (a checkpoint-N folder that an interrupted save left incomplete), which it refuses.
	next, fresh := "", t.args
	fresh.ResumeFromCheckpoint = ""
	switch {
	case interruptedRunLog(fresh.OutputDir, fresh.OverwriteOutputDir):
		next = fmt.Sprintf("the same command does, keeping this run's %s as %s.N", MetricsName, MetricsName)
	case fresh.CheckOutputDir() == nil:
		next = "the same command does"
	default:
		next = fmt.Sprintf("give it another output_dir, or remove %s first", fresh.OutputDir)
	}
	return interruptedError{fmt.Sprintf("trainer: training interrupted %s %d; no checkpoint was saved in %s (save_strategy %s), so a "+
		"new run starts from the beginning: %s", at, step, t.args.OutputDir, t.args.SaveStrategy, next), err}
}

// withEarlierCheckpoint adds to err, the failure to resume from dir when dir fails VerifyCheckpoint, the newest
// other complete (verified) checkpoint of outputDir, to resume from instead: the newest is often the one a kill
// or a full disk damaged.
func withEarlierCheckpoint(err error, outputDir, dir string) error {
	if VerifyCheckpoint(dir) == nil {
		return err // it failed for another reason than its files
	}
	all, _ := ScanCheckpoints(outputDir)
	for i := len(all) - 1; i >= 0; i-- {
		if c := all[i]; c.Problem == "" && filepath.Clean(c.Dir) != filepath.Clean(dir) && VerifyCheckpoint(c.Dir) == nil {
			return fmt.Errorf("%w; the newest other complete checkpoint is %s (step %d): resume_from_checkpoint=%s continues from there", err, c.Dir, c.Step, c.Dir)
		}
	}
	return err
}

// interruptedError is interrupted's error: its message, wrapping the context's error unprinted.
type interruptedError struct {
	msg string
	err error
}

func (e interruptedError) Error() string { return e.msg }
func (e interruptedError) Unwrap() error { return e.err }

// finalModel returns the model file a finished run left in dir (model.safetensors, or a LoRA run's
// adapter_model.safetensors), "" when there is none.
func finalModel(dir string) string {
	for _, name := range []string{"model.safetensors", "model.safetensors.index.json", "adapter_model.safetensors"} {
		if p := filepath.Join(dir, name); regularFile(p) {
			return p
		}
	}
	return ""
}

func regularFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// ErrNothingToTrain is wrapped by Train's error when resume_from_checkpoint names a checkpoint at the end of
// training and output_dir already holds the run's final model: there is nothing left to do.
var ErrNothingToTrain = errors.New("nothing left to train")

// newState returns the TrainerState of a fresh run.
func (t *Trainer) newState(total, epochs int) *TrainerState {
	a := &t.args
	return &TrainerState{
		EvalSteps: a.EvalInterval(total), LoggingSteps: a.LoggingInterval(total), SaveSteps: a.SaveInterval(total),
		MaxSteps: total, NumTrainEpochs: epochs, TrainBatchSize: a.PerDeviceTrainBatchSize,
		IsLocalProcessZero: true, IsWorldProcessZero: true, LogHistory: []LogEntry{},
		StatefulCallbacks: map[string]CallbackState{},
	}
}

// setupCallbacks installs the default flow, early stopping, metrics.jsonl, the progress display and the plot,
// then the user's callbacks.
func (t *Trainer) setupCallbacks() {
	a := &t.args
	s := t.state
	t.callbacks = []Callback{&defaultFlow{logEvery: s.LoggingSteps, evalEvery: s.EvalSteps, saveEvery: s.SaveSteps}}
	if a.EarlyStoppingPatience > 0 {
		t.callbacks = append(t.callbacks, &EarlyStopping{Patience: a.EarlyStoppingPatience, Threshold: a.EarlyStoppingThreshold})
	}
	t.callbacks = append(t.callbacks, newJSONLWriter(a.OutputDir), newProgress(t.out, t), &curvePlotter{})
	t.callbacks = append(t.callbacks, t.user...)
}

// trainEpoch runs the optimizer steps of epoch r.epoch from position r.microDone.
func (t *Trainer) trainEpoch(ctx context.Context) error {
	a, r := &t.args, &t.run
	epoch := r.epoch
	seed := a.Seed
	if a.DataSeed != nil {
		seed = *a.DataSeed
	}
	order, err := epochOrder(t.train, a.Shuffle, seed, epoch, a.PerDeviceTrainBatchSize)
	if err != nil {
		return err
	}
	micro := loaders.Batches(order, a.PerDeviceTrainBatchSize, false) // HF keeps the short last batch
	t.control.ShouldEpochStop = false
	if err := t.fire(func(cb Callback, e *Event) error { return cb.OnEpochBegin(e) }); err != nil {
		return err
	}
	for r.epoch == epoch && !t.control.ShouldEpochStop && !t.control.ShouldTrainingStop {
		if err := ctx.Err(); err != nil {
			return t.interrupted(err, "at step")
		}
		t.control.ShouldLog, t.control.ShouldEvaluate, t.control.ShouldSave = false, false, false
		if err := t.fire(func(cb Callback, e *Event) error { return cb.OnStepBegin(e) }); err != nil {
			return err
		}
		end := min(r.microDone+a.GradientAccumulationSteps, len(micro))
		if d := t.deferred; d != nil {
			if d.full(a.GradientAccumulationSteps, a.PerDeviceTrainBatchSize) {
				if err := t.readDeferred(); err != nil {
					return err
				}
			}
			d.begin(t.state.GlobalStep+1, r.lr, t.state.Epoch)
		}
		loss, tokens, err := t.step(micro[r.microDone:end])
		if err != nil {
			return err
		}
		r.microDone = end
		if end == len(micro) {
			r.epoch, r.microDone = epoch+1, 0
		}
		s := t.state
		s.GlobalStep++
		s.Epoch = float64(epoch) + float64(end)/float64(len(micro))
		s.NumInputTokensSeen += int64(tokens)
		if t.deferred == nil { // else readDeferred adds the loss when it reads it
			r.lastLoss = loss
			r.trLoss += loss
			r.totalLoss += loss
		}
		if err := t.fire(func(cb Callback, e *Event) error { return cb.OnStepEnd(e) }); err != nil {
			return err
		}
		if err := t.maybeLogSaveEvaluate(ctx); err != nil {
			return err
		}
	}
	if err := t.fire(func(cb Callback, e *Event) error { return cb.OnEpochEnd(e) }); err != nil {
		return err
	}
	return t.maybeLogSaveEvaluate(ctx)
}

// step runs one optimizer step over the micro-batches of window: forward and backward over each, then
// optimizerStep — as one CUDA graph under cuda_graphs (graphs.go). It returns trainWindow's loss and tokens.
func (t *Trainer) step(window [][]int) (loss float64, tokens int, err error) {
	batches, total, err := t.windowBatches(window)
	if err != nil {
		return 0, 0, err
	}
	run := func() error {
		var err error
		if loss, tokens, err = t.trainWindow(batches, total); err != nil {
			return err
		}
		return t.optimizerStep()
	}
	if t.graph != nil {
		err = t.graph.step(t, batches, run)
	} else {
		err = run()
	}
	return loss, tokens, err
}

// windowBatches collates the micro-batches of window and counts their supervised labels.
func (t *Trainer) windowBatches(window [][]int) (batches []*loaders.Batch, total int, err error) {
	batches = make([]*loaders.Batch, len(window))
	for i, idx := range window {
		if batches[i], err = t.train.Batch(idx); err != nil {
			return nil, 0, fmt.Errorf("trainer: training batch at step %d: %w", t.state.GlobalStep+1, err)
		}
		if batches[i].Labels == nil && batches[i].Targets == nil {
			return nil, 0, fmt.Errorf("trainer: training batch at step %d has no labels; the training set needs a label column", t.state.GlobalStep+1)
		}
		total += t.model.Supervised(batches[i])
	}
	return batches, total, nil
}

// trainWindow runs forward and backward over the micro-batches of one accumulation window (total: their
// supervised labels) and returns the
// window's mean loss over its supervised labels (Model.Supervised: examples, or tokens of a causal LM) and its number of tokens. Each micro-batch's Backward is seeded
// with scale·n_i/Σn (loss normalisation by num_items_in_batch, transformers' trainer.py), so the accumulated gradient is that of the window's mean loss, scaled.
func (t *Trainer) trainWindow(batches []*loaders.Batch, total int) (loss float64, tokens int, err error) {
	r := &t.run
	r.scale = t.scaler.Scale()
	cast := false // the window's first Forward casts the weights; nothing can change them before its last
	for i, b := range batches {
		opts := ForwardOptions{Train: true, Seed: uint64(t.args.Seed), Offset: r.dropoutOffset, ReuseWeightCasts: cast}
		r.dropoutOffset += dropoutStride
		r.samples += b.B
		n := t.model.Supervised(b)
		if n == 0 {
			continue // contributes nothing to the window's loss or gradient
		}
		seed := float32(float64(r.scale) * float64(n) / float64(total))
		if t.deferred != nil && t.deferred.fp16 != nil { // the scale multiplies the share on the device
			seed, opts.LossScale = float32(float64(n)/float64(total)), t.deferred.fp16.dev.Scale
		}
		opts.BackwardSeed = seed // a causal LM's head back-propagates during Forward (bit-identical)
		opts.DeferLoss = t.deferred != nil
		out, err := t.model.Forward(b, opts)
		if err != nil {
			return 0, 0, fmt.Errorf("trainer: forward at step %d: %w", t.state.GlobalStep+1, err)
		}
		cast = true
		if t.deferred != nil {
			if err := t.deferred.addMicro(out, n, total, i, len(batches), b); err != nil {
				return 0, 0, err
			}
		} else if !isFinite(float64(out.Loss)) {
			return 0, 0, t.lossError(out.Loss, i, len(batches), b)
		}
		if err := t.model.Backward(seed); err != nil {
			return 0, 0, fmt.Errorf("trainer: backward at step %d: %w", t.state.GlobalStep+1, err)
		}
		loss += float64(out.Loss) * float64(n) / float64(total)
		tokens += b.NumTokens()
		if out.Targets > 0 { // TRL's mean_token_accuracy: the mean of the micro-batches' correct/supervised
			r.accSum += float64(out.Correct) / float64(out.Targets)
			r.accN++
		}
	}
	if total == 0 {
		return 0, 0, fmt.Errorf("trainer: the micro-batches of step %d have no labelled example (every label is -100)", t.state.GlobalStep+1)
	}
	return loss, tokens, nil
}

// optimizerStep unscales, clips, steps the optimizer and the schedule unless the scaler skips, updates the
// scaler and zeroes the gradients: once per accumulation window (clipping after unscale_, torch/amp/grad_scaler.py; the schedule holding on a skipped step, transformers' trainer.py; one clip per optimizer step, transformers' trainer.py).
func (t *Trainer) optimizerStep() error {
	r, b := &t.run, t.model.Backend()
	_, g, _ := t.model.Trainable()
	grads := []*tensor.Tensor{g}
	if d := t.deferred; d != nil {
		step := t.clipAndStep
		if d.fp16 != nil {
			step = t.scaledStep
		}
		if err := step(d, grads); err != nil {
			return err
		}
		if err := t.model.ZeroGrad(); err != nil {
			return fmt.Errorf("trainer: step %d: zero grad: %w", t.state.GlobalStep+1, err)
		}
		return nil
	}
	if err := t.scaler.Unscale(grads); err != nil {
		return fmt.Errorf("trainer: step %d: %w", t.state.GlobalStep+1, err)
	}
	var err error
	if t.args.MaxGradNorm > 0 {
		r.gradNorm, err = amp.ClipGradNorm(b, grads, t.args.MaxGradNorm)
	} else {
		r.gradNorm, err = b.GlobalNorm(grads)
	}
	if err != nil {
		return fmt.Errorf("trainer: step %d: gradient norm: %w", t.state.GlobalStep+1, err)
	}
	if !t.scaler.Enabled() && !isFinite(r.gradNorm) {
		if err := t.gradientError(); err != nil {
			return err
		}
	}
	r.lr = t.sched.LR()
	skipped, err := t.scaler.Step(func() error { return t.opt.Step(r.lr) })
	if err != nil {
		return fmt.Errorf("trainer: step %d: %w", t.state.GlobalStep+1, err)
	}
	if err := t.scaler.Update(); err != nil {
		return fmt.Errorf("trainer: step %d: %w", t.state.GlobalStep+1, err)
	}
	if skipped {
		r.skippedSinceLog++
		if err := t.skippedStep(); err != nil {
			return err
		}
	} else {
		r.consecutiveSkips = 0
		if next := t.scaler.Scale(); next != r.scale { // growth after growth_interval clean steps
			entry := LogEntry{"step": float64(t.state.GlobalStep + 1), "epoch": t.state.Epoch, "loss_scale": float64(r.scale), "next_loss_scale": float64(next)}
			if err := newJSONLWriter(t.args.OutputDir).OnLog(nil, entry); err != nil {
				return err
			}
		}
		t.model.WeightsUpdated()
		t.sched.Step()
	}
	if err := t.model.ZeroGrad(); err != nil {
		return fmt.Errorf("trainer: step %d: zero grad: %w", t.state.GlobalStep+1, err)
	}
	return nil
}

// maybeLogSaveEvaluate acts on the control flags: log the training metrics, evaluate, save a checkpoint.
func (t *Trainer) maybeLogSaveEvaluate(ctx context.Context) error {
	r, s, c := &t.run, t.state, &t.control
	if c.ShouldLog || c.ShouldEvaluate || c.ShouldSave {
		if err := t.readDeferred(); err != nil {
			return err
		}
	}
	if c.ShouldLog && s.GlobalStep > r.lastLogged {
		logs := LogEntry{
			"loss":          r.trLoss / float64(s.GlobalStep-r.lastLogged),
			"grad_norm":     r.gradNorm,
			"learning_rate": r.lr,
		}
		if t.scaler.Enabled() { // fp16 only: bf16 trains without a loss scale
			logs["loss_scale"] = float64(r.scale)
		}
		if t.scaler.Enabled() {
			logs["skipped_steps"] = float64(r.skippedSinceLog)
		}
		if r.accN > 0 { // a causal LM: TRL's SFTTrainer also logs the tokens trained on so far (Σ attention_mask)
			logs["mean_token_accuracy"] = r.accSum / float64(r.accN)
			logs["num_tokens"] = float64(s.NumInputTokensSeen)
		}
		r.trLoss, r.lastLogged, r.skippedSinceLog = 0, s.GlobalStep, 0
		r.accSum, r.accN = 0, 0
		if err := t.log(logs); err != nil {
			return err
		}
	}
	c.ShouldLog = false
	if c.ShouldEvaluate && r.lastEval != s.GlobalStep && t.eval != nil {
		r.lastEval = s.GlobalStep
		metrics, err := t.Evaluate(ctx)
		if errors.Is(err, context.Canceled) {
			return t.interrupted(err, "in the evaluation after step")
		}
		if err != nil {
			return err
		}
		if err := t.updateBest(metrics); err != nil {
			return err
		}
	}
	c.ShouldEvaluate = false
	// A second save at the same step (max_steps at an epoch's end asks for one after the step and one after
	// the epoch) happens only when an evaluation ran in between, so the checkpoint holds its best metric.
	if c.ShouldSave && (r.lastSaved != s.GlobalStep || (!r.savedWithEval && r.lastEval == s.GlobalStep)) {
		r.lastSaved, r.savedWithEval = s.GlobalStep, r.lastEval == s.GlobalStep
		dir, err := t.saveCheckpoint()
		if err != nil {
			return err
		}
		if err := t.fire(func(cb Callback, e *Event) error { return cb.OnSave(e, dir) }); err != nil {
			return err
		}
	}
	c.ShouldSave = false
	return nil
}

// updateBest records metrics' metric_for_best_model in best_metric / best_global_step when it is the best yet,
// when metric_for_best_model or load_best_model_at_end is set.
// A metric that the evaluation did not produce is an error only when metric_for_best_model was set explicitly.
func (t *Trainer) updateBest(metrics map[string]float64) error {
	if t.args.MetricForBestModel == "" && !t.args.LoadBestModelAtEnd {
		// transformers tracks the best metric only when metric_for_best_model is set (load_best_model_at_end
		// sets it to "loss"): trainer_state.json then keeps best_metric and best_global_step null.
		return nil
	}
	key := "eval_" + t.args.BestMetric()
	v, ok := metrics[key]
	if !ok || math.IsNaN(v) {
		if t.args.MetricForBestModel != "" {
			return fmt.Errorf("trainer: metric_for_best_model %q is not among the eval metrics %v", t.args.MetricForBestModel, keys(metrics))
		}
		return nil
	}
	s := t.state
	if s.BestMetric == nil || isBetter(v, *s.BestMetric, t.args.IsGreaterBetter()) {
		step := s.GlobalStep
		s.BestMetric, s.BestGlobalStep = &v, &step
	}
	return nil
}

// finish loads the best model if asked, logs the run's summary, writes trainer_state.json and ends the
// callbacks (the progress bar, the plot).
func (t *Trainer) finish(ctx context.Context) (TrainOutput, error) {
	r, s := &t.run, t.state
	if err := t.readDeferred(); err != nil {
		return TrainOutput{}, err
	}
	if t.args.LoadBestModelAtEnd && s.BestModelCheckpoint != nil {
		if err := t.loadModel(*s.BestModelCheckpoint); err != nil {
			return TrainOutput{}, fmt.Errorf("trainer: load_best_model_at_end: %w", err)
		}
		t.logger.Info("loaded the best model", "checkpoint", *s.BestModelCheckpoint, "metric", "eval_"+t.args.BestMetric(), "value", *s.BestMetric)
	}
	secs := max(time.Since(r.start).Seconds(), 1e-9)
	steps := s.GlobalStep - r.startStep
	trainLoss := t.runLoss(r.totalLoss, steps)
	metrics := map[string]float64{
		"train_runtime":            secs,
		"train_samples_per_second": float64(r.samples) / secs,
		"train_steps_per_second":   float64(steps) / secs,
		"train_loss":               trainLoss,
		"total_flos":               s.TotalFlos,
	}
	entry := LogEntry{}
	for k, v := range metrics {
		entry[k] = v
	}
	if err := t.log(entry); err != nil {
		return TrainOutput{}, err
	}
	metrics["epoch"] = s.Epoch
	t.saveCallbackStates()
	if err := s.Save(filepath.Join(t.args.OutputDir, TrainerStateName)); err != nil {
		return TrainOutput{}, err
	}
	if err := t.fire(func(cb Callback, e *Event) error { return cb.OnTrainEnd(e) }); err != nil {
		return TrainOutput{}, err
	}
	if err := t.recordOutputs(); err != nil {
		return TrainOutput{}, err
	}
	return TrainOutput{GlobalStep: s.GlobalStep, StartStep: r.startStep, TrainingLoss: trainLoss, Metrics: metrics}, nil
}

// runLoss is the mean training loss over the whole run: this call's steps (lossSum over steps) and, after a
// resume, the steps before it whose loss log_history holds (each logged loss is the mean of its window since
// the previous logged step) and the window open at the checkpoint (DataState.LossSinceLog; a checkpoint of an
// older tune has none, and those steps are not counted).
func (t *Trainer) runLoss(lossSum float64, steps int) float64 {
	prev, covered := 0.0, float64(steps)
	lossSum += t.run.resumedLoss
	covered += float64(t.run.resumedWindow)
	for _, l := range t.state.LogHistory {
		v, ok := l["loss"]
		if !ok || l["step"] > float64(t.run.startStep) {
			continue
		}
		lossSum += v * (l["step"] - prev)
		covered += l["step"] - prev
		prev = l["step"]
	}
	return lossSum / max(covered, 1)
}

// storeFrozenHalf reports whether training under policy stores the frozen projection weights in its autocast
// dtype (transformer.FrozenStorage): under FP16/BF16 autocast, unless fp16_full_eval/bf16_full_eval asks for
// evaluation in the other half dtype, which the half-stored weights cannot run in (their FP32 values are gone).
func storeFrozenHalf(a TrainingArguments, policy amp.Policy) bool {
	if !policy.Enabled {
		return false
	}
	return !(a.FP16FullEval && policy.DType != tensor.F16) && !(a.BF16FullEval && policy.DType != tensor.BF16)
}
