package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// paramLayout is one trainable parameter's place in the flat buffer, recorded in the optimizer file so that a
// resume into a different parameter layout fails instead of pairing moments with the wrong weights.
type paramLayout struct {
	Name   string `json:"name"`
	Offset int    `json:"offset"`
	Numel  int    `json:"numel"`
}

// layout returns the trainable parameters that are views of the flat buffer, in NamedParameters order.
func (t *Trainer) layout() []paramLayout {
	params, _, _ := t.model.Trainable()
	var out []paramLayout
	for _, p := range t.model.NamedParameters() {
		if p.Trainable && p.Value != nil && p.Value.Buf == params.Buf {
			out = append(out, paramLayout{p.Name, p.Value.Offset - params.Offset, p.Value.Numel()})
		}
	}
	return out
}

// saveOptimizer writes OptimizerName: exp_avg and exp_avg_sq as flat F32 tensors; step, the param group and
// the layout in the metadata.
func (t *Trainer) saveOptimizer(dir string) error {
	st, err := t.opt.State()
	if err != nil {
		return err
	}
	avg, err := loaders.NewHostTensor("exp_avg", tensor.F32, []int{len(st.ExpAvg)}, st.ExpAvg)
	if err != nil {
		return err
	}
	avgSq, err := loaders.NewHostTensor("exp_avg_sq", tensor.F32, []int{len(st.ExpAvgSq)}, st.ExpAvgSq)
	if err != nil {
		return err
	}
	group, _ := json.Marshal(map[string]any{
		"lr": t.sched.LR(), "initial_lr": t.args.LearningRate, "betas": []float64{st.Beta1, st.Beta2},
		"eps": st.Eps, "weight_decay": st.WeightDecay, "decoupled_weight_decay": true,
	})
	layout, _ := json.Marshal(t.layout())
	meta := map[string]string{"format": "tune-adamw", "step": strconv.Itoa(st.Step), "param_group": string(group), "params": string(layout)}
	return loaders.WriteSafetensors(filepath.Join(dir, OptimizerName), []loaders.HostTensor{avg, avgSq}, meta)
}

// loadOptimizer reads OptimizerName into the optimizer.
func (t *Trainer) loadOptimizer(dir string) error {
	path := filepath.Join(dir, OptimizerName)
	ck, err := loaders.OpenCheckpoint(path)
	if err != nil {
		return err
	}
	defer ck.Close()
	meta := ck.Metadata()
	step, err := strconv.Atoi(meta["step"])
	if err != nil {
		return fmt.Errorf("%s: metadata \"step\" %q is not an integer", path, meta["step"])
	}
	var move func([]float32) ([]float32, error)
	if saved := meta["params"]; saved != "" {
		nowLayout := t.layout()
		now, _ := json.Marshal(nowLayout)
		if saved != string(now) {
			var old []paramLayout
			if json.Unmarshal([]byte(saved), &old) != nil || !sameParams(old, nowLayout) {
				return fmt.Errorf("%s was written for another set of trainable parameters (a different model, LoRA configuration or frozen set); resume with the configuration that wrote it", path)
			}
			move = func(v []float32) ([]float32, error) { return relayout(v, old, nowLayout) }
		}
	}
	st := AdamWState{Step: step}
	for name, dst := range map[string]*[]float32{"exp_avg": &st.ExpAvg, "exp_avg_sq": &st.ExpAvgSq} {
		ht, err := ck.Get(name)
		if err != nil {
			return err
		}
		if *dst, err = ht.Float32(); err != nil {
			return err
		}
		if move != nil {
			if *dst, err = move(*dst); err != nil {
				return fmt.Errorf("%s: %s: %w", path, name, err)
			}
		}
	}
	return t.opt.LoadState(st)
}

// sameParams reports whether two layouts list the same parameters (names and sizes, in the same order)
// at other offsets: a flat buffer laid out in another order (a checkpoint written before the model packed a
// LinearStack's weights together), whose moments relayout moves to their parameters' new places.
func sameParams(a, b []paramLayout) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Numel != b[i].Numel {
			return false
		}
	}
	return true
}

// relayout returns v, a flat buffer laid out as from, with each parameter's elements moved to its offset in
// to (sameParams layouts); an error when a range of either lies outside v.
func relayout(v []float32, from, to []paramLayout) ([]float32, error) {
	out := make([]float32, len(v))
	for i := range from {
		f, t, n := from[i].Offset, to[i].Offset, from[i].Numel
		if n < 0 || f < 0 || t < 0 || f+n > len(v) || t+n > len(v) {
			return nil, fmt.Errorf("parameter %s (offset %d, %d elements) lies outside the %d saved moments", from[i].Name, f, n, len(v))
		}
		copy(out[t:t+n], v[f:f+n])
	}
	return out, nil
}

// loadModel restores the model's weights from a checkpoint directory through Loader.
func (t *Trainer) loadModel(dir string) error {
	l, ok := t.model.(Loader)
	if !ok {
		return fmt.Errorf("trainer: the model (%T) cannot read checkpoints back: it does not implement trainer.Loader", t.model)
	}
	if err := l.Load(dir); err != nil {
		return fmt.Errorf("trainer: loading the model from %s: %w", dir, err)
	}
	t.model.WeightsUpdated()
	return nil
}

// loadCheckpoint restores everything a checkpoint holds: weights, optimizer, scheduler, scaler, data position,
// trainer state and the stateful callbacks. It runs after the callbacks are set up and before the first step.
func (t *Trainer) loadCheckpoint(dir string) error {
	if err := VerifyCheckpoint(dir); err != nil { // before anything loads: every file there, sizes and sums
		return err
	}
	st, err := LoadTrainerState(filepath.Join(dir, TrainerStateName), t.run.total)
	if err != nil {
		return err
	}
	if st.GlobalStep > t.run.total {
		// Past this run's end there is nothing to train, and finishing would save a model of more steps than
		// the run asks under its name ("trained steps 21-20"). transformers' Trainer (_inner_training_loop in
		// trainer.py) skips to the saved step and trains one step more before its max_steps check, or none when
		// the step lies past the run's last epoch; tune refuses it before anything loads.
		return badinput.Errorf("trainer: %s: global_step %d is beyond the end of this run (max_steps %d): the "+
			"checkpoint trained further than this run asks; set training.max_steps above %d to train on from it, or "+
			"resume from a checkpoint at or before step %d", filepath.Join(dir, TrainerStateName), st.GlobalStep,
			t.run.total, st.GlobalStep, t.run.total)
	}
	wrap := func(what string, err error) error {
		return fmt.Errorf("trainer: resume from %s: %s: %w", dir, what, err)
	}
	if err := t.loadModel(dir); err != nil {
		return err
	}
	if err := t.loadOptimizer(dir); err != nil {
		return wrap("optimizer", err)
	}
	var sched SchedulerState
	if err := readJSON(filepath.Join(dir, SchedulerName), &sched); err != nil {
		return wrap("scheduler", err)
	}
	if err := t.sched.LoadStateDict(sched); err != nil {
		return wrap("scheduler", err)
	}
	if err := t.loadScaler(dir); err != nil {
		return wrap("scaler", err)
	}
	t.warnPrecision(dir)
	if err := t.loadDataState(dir, st.GlobalStep, st.TrainBatchSize); err != nil {
		return fmt.Errorf("trainer: resume from %s: %w", dir, err)
	}
	s := t.state
	s.GlobalStep, s.Epoch, s.LogHistory = st.GlobalStep, st.Epoch, st.LogHistory
	s.BestGlobalStep, s.BestMetric, s.BestModelCheckpoint = st.BestGlobalStep, st.BestMetric, st.BestModelCheckpoint
	s.NumInputTokensSeen, s.TotalFlos = st.NumInputTokensSeen, st.TotalFlos
	if s.LogHistory == nil {
		s.LogHistory = []LogEntry{}
	}
	for _, cb := range t.callbacks {
		if sc, ok := cb.(StatefulCallback); ok {
			if cs, ok := st.StatefulCallbacks[sc.Name()]; ok {
				if err := sc.LoadState(cs); err != nil {
					return wrap(sc.Name(), err)
				}
			}
		}
	}
	t.logger.Info(fmt.Sprintf("resuming from %s (global step %d)", dir, s.GlobalStep))
	return nil
}

// warnPrecision warns when the checkpoint in dir was trained in another precision (training_args.json's fp16
// and bf16) than this run: the resume goes on, but not as that run would have (another rounding of every
// step; an FP16 run's loss scale is dropped, or an FP32 or BF16 run's resumed in FP16 starts from init_scale).
// An FP16 checkpoint resumed in FP32 said nothing (tester7 F8).
func (t *Trainer) warnPrecision(dir string) {
	var was struct {
		FP16 bool `json:"fp16"`
		BF16 bool `json:"bf16"`
	}
	if readJSON(filepath.Join(dir, TrainingArgsName), &was) != nil {
		return // an older or another program's checkpoint: nothing to compare
	}
	name := func(fp16, bf16 bool) string {
		switch {
		case fp16:
			return "fp16"
		case bf16:
			return "bf16"
		}
		return "fp32"
	}
	if then, now := name(was.FP16, was.BF16), name(t.args.FP16, t.args.BF16); then != now {
		t.logger.Warn(fmt.Sprintf("the checkpoint was trained in %s and this run trains in %s: the remaining steps "+
			"round differently from that run's, so the result is not the one it would have reached; resume with "+
			"%s to continue it exactly", then, now, then), "checkpoint", dir)
	}
}

// loadScaler restores the GradScaler of an FP16 run. A checkpoint without scaler state is not an error (it may
// come from a bf16 or fp32 run, or an older tune), but the loss scale then restarts from init_scale and the
// first resumed steps may overflow and be skipped, so it is logged as a warning (the GradScaler state across a resume, GradScaler.state_dict in torch/amp/grad_scaler.py).
func (t *Trainer) loadScaler(dir string) error {
	path := filepath.Join(dir, ScalerName)
	if !t.scaler.Enabled() {
		return nil
	}
	var st amp.GradScalerState
	err := readJSON(path, &st)
	switch {
	case errors.Is(err, fs.ErrNotExist) || (err == nil && st.IsEmpty()):
		t.logger.Warn("resuming an fp16 run from a checkpoint without GradScaler state: the loss scale restarts at init_scale, so the first steps may overflow and be skipped",
			"checkpoint", dir, "scale", t.scaler.Scale())
		return nil
	case err != nil:
		return err
	}
	return t.scaler.LoadStateDict(st)
}

// loadDataState restores the data and dropout position. Without rng_state.json, or when the checkpoint was
// trained with another per_device_train_batch_size (batch, 0 when unknown), it is derived from the global step
// as transformers does (whole accumulation windows from the start of the epoch: epochs_trained and
// steps_trained_in_current_epoch in Trainer._inner_training_loop) and a warning is logged. A position counted
// in micro-batches of another size would not fit this run's epochs: the epoch loop then ran out before
// max_steps (a batch-32 checkpoint at step 200 resumed at batch 16 stopped at step 375 of 400).
func (t *Trainer) loadDataState(dir string, globalStep, batch int) error {
	r := &t.run
	derive := func(why string) {
		r.epoch = globalStep / r.stepsPerEpoch
		r.microDone = min((globalStep%r.stepsPerEpoch)*t.args.GradientAccumulationSteps, r.numMicro)
		r.dropoutOffset = uint64(r.epoch*r.numMicro+r.microDone) * dropoutStride
		t.logger.Warn(why+": the data position is derived from global_step as transformers does (epoch "+
			strconv.Itoa(r.epoch)+", micro-batch "+strconv.Itoa(r.microDone)+"), so the remaining data order and "+
			"dropout masks differ from the original run's", "checkpoint", dir)
	}
	if batch != 0 && batch != t.args.PerDeviceTrainBatchSize {
		derive(fmt.Sprintf("resuming with a different per_device_train_batch_size (checkpoint %d, now %d)", batch, t.args.PerDeviceTrainBatchSize))
		return nil
	}
	var ds DataState
	err := readJSON(filepath.Join(dir, RNGStateName), &ds)
	if errors.Is(err, fs.ErrNotExist) {
		derive("checkpoint has no " + RNGStateName)
		return nil
	}
	if err != nil {
		return err
	}
	now := t.dataState()
	if ds.Seed != now.Seed || ds.DataSeed != now.DataSeed || ds.Shuffle != now.Shuffle {
		t.logger.Warn("resuming with a different seed, data_seed or shuffle: the remaining data order and dropout masks differ from the original run's",
			"checkpoint_seed", ds.Seed, "seed", now.Seed, "checkpoint_data_seed", ds.DataSeed, "data_seed", now.DataSeed)
	}
	if ds.TrainExamples > 0 && ds.TrainExamples != t.train.Len() {
		t.logger.Warn(fmt.Sprintf("the training set has %d examples, the checkpoint's run had %d: the remaining data order "+
			"and the schedule (steps per epoch, max_steps of num_train_epochs) differ from that run's", t.train.Len(), ds.TrainExamples), "checkpoint", dir)
	}
	if ds.MicroBatches > r.numMicro || ds.Epoch < 0 {
		had := ""
		if ds.TrainExamples > 0 {
			had = fmt.Sprintf(" (that run had %d examples, this one has %d)", ds.TrainExamples, t.train.Len())
		}
		return badinput.Errorf("the checkpoint stopped at epoch %d, micro-batch %d, which this training set does not have "+
			"(%d micro-batches per epoch): the training data differ from the checkpoint's run%s; resume with that run's "+
			"data, or start a new run", ds.Epoch, ds.MicroBatches, r.numMicro, had)
	}
	ga := t.args.GradientAccumulationSteps
	if at := ds.Epoch*r.stepsPerEpoch + (ds.MicroBatches+ga-1)/ga; at != globalStep {
		// Another gradient_accumulation_steps (or training set): that position is not global_step's in this
		// run, and the epochs left would end before max_steps (or at once: "trained steps 201-200").
		derive(fmt.Sprintf("the checkpoint's data position (epoch %d, micro-batch %d) is step %d with this run's "+
			"gradient_accumulation_steps %d and training set, not its global_step %d", ds.Epoch, ds.MicroBatches, at, ga, globalStep))
		return nil
	}
	r.epoch, r.microDone, r.dropoutOffset = ds.Epoch, ds.MicroBatches, ds.DropoutOffset
	if ds.StepsSinceLog > 0 && ds.StepsSinceLog <= globalStep {
		// The logging window open at the checkpoint goes on (Train starts the window that many steps back).
		r.resumedWindow, r.resumedLoss = ds.StepsSinceLog, ds.LossSinceLog
		r.trLoss, r.accSum, r.accN, r.skippedSinceLog = ds.LossSinceLog, ds.AccSumSinceLog, ds.AccNSinceLog, ds.SkippedSinceLog
	}
	return nil
}
