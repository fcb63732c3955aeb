package trainer

import (
	"fmt"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
)

// FP16 steps without host waits.
//
// With FP16 loss scaling the deferred steps (deferred.go) keep the GradScaler on the device too
// (amp.DeviceScaler): the backward is seeded with the micro-batch's share times the device scale
// (ForwardOptions.LossScale), the unscale sets the device's found-inf flag, AdamW skips by it and takes its learning rate and bias correction from a table row indexed by the device count of steps
// not skipped (tensor.AdamWArgs.Table/Row), and the scale update runs on the device, copying the flag into
// slot k of a ring for step k and stopping the updates (every later step skipped) once
// max_consecutive_skipped_steps steps in a row were skipped. The table is the
// schedule known in advance: row k holds AdamW's scalars for the k-th optimizer step this Train call takes,
// computed by the host with the float64 arithmetic of LRScheduler.LR and Backend.AdamW, so a skipped step
// holds the schedule and the bias correction exactly as PyTorch's skipped optimizer.step() and the unstepped
// scheduler do. When the rings are read the host replays each step with the flags it read: the GradScaler
// (UpdateFound: the same scale and growth tracker), the schedule, AdamW's step count, the skipped-step
// warnings and metrics.jsonl entries, the max_consecutive_skipped_steps stop and the growth entries, each
// naming its step. The host's replay and the device's state are compared at every read.
//
// What changes: a skipped step's warning says "a gradient" instead of naming the parameter (its gradient is
// gone by the read; TUNE_SYNC_FREE=0 names it), and a stop after max_consecutive_skipped_steps is reported at
// the read following it, the steps queued after it having run without changing anything.

// scaledSteps is the device state of deferred FP16 steps.
type scaledSteps struct {
	dev      *amp.DeviceScaler
	found    *tensor.Tensor // I32 (pendingCap): found-inf flag of pending step k
	table    *tensor.Tensor // F32 (K, 3): AdamW's scalars of the k-th step this Train call takes
	optStep0 int            // AdamW steps taken before this Train call (restored by a resume)
}

// newScaledSteps moves the GradScaler's state to the device and uploads the AdamW table for the at most
// steps optimizer steps of this Train call.
func (t *Trainer) newScaledSteps(steps int) (*scaledSteps, error) {
	b := t.model.Backend()
	f := &scaledSteps{optStep0: t.opt.Steps()}
	var err error
	if f.dev, err = t.scaler.OnDevice(); err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	f.dev.MaxSkipped = max(t.args.MaxConsecutiveSkippedSteps, 0)
	if f.found, err = b.Alloc(tensor.I32, pendingCap); err != nil {
		f.free(b)
		return nil, fmt.Errorf("trainer: found-inf ring: %w", err)
	}
	rows := max(steps, 1)
	table := make([]float32, 0, 3*rows)
	for k := range rows {
		lr := t.sched.BaseLR * t.sched.Factor(t.sched.LastEpoch+k) // LRScheduler.LR at that position
		r := tensor.AdamWScalars(float32(lr), float32(t.opt.Beta1), float32(t.opt.Beta2), float32(t.opt.WeightDecay), f.optStep0+k+1)
		table = append(table, r[:]...)
	}
	if f.table, err = b.Alloc(tensor.F32, rows, 3); err == nil {
		err = b.Upload(f.table, table)
	}
	if err != nil {
		f.free(b)
		return nil, fmt.Errorf("trainer: AdamW step table: %w", err)
	}
	return f, nil
}

func (f *scaledSteps) free(b tensor.Backend) {
	if f == nil {
		return
	}
	if f.dev != nil {
		f.dev.Free()
	}
	for _, x := range []*tensor.Tensor{f.found, f.table} {
		if x != nil {
			b.Free(x)
		}
	}
}

// scaledStep is the optimizer step of a deferred FP16 step: unscale with the found-inf check, the norm into the
// step's ring slot, AdamW unless the flag is set (clipping the gradients as it reads them), the scale update recording the
// flag in the step's slot.
func (t *Trainer) scaledStep(d *deferredSteps, grads []*tensor.Tensor) error {
	k := len(d.steps) - 1
	found, err := d.fp16.found.View(k, 1)
	if err != nil {
		return err
	}
	slot, err := d.norms.View(k, 1)
	if err != nil {
		return err
	}
	slot = d.stageOr(slot, d.normStage)
	if d.foundStage != nil {
		found = d.stageOr(found, d.foundStage)
	}
	step := t.state.GlobalStep + 1
	if err := d.fp16.dev.Unscale(grads); err != nil {
		return fmt.Errorf("trainer: step %d: %w", step, err)
	}
	clip, err := t.deviceNorm(grads, slot, nil) // no flag: the unscale's Found decides the skip
	if err != nil {
		return err
	}
	if err := t.opt.StepOnDevice(d.fp16.dev.Found, d.fp16.table, d.fp16.dev.Steps, clip); err != nil {
		return fmt.Errorf("trainer: step %d: %w", step, err)
	}
	if err := d.fp16.dev.Update(found); err != nil {
		return fmt.Errorf("trainer: step %d: %w", step, err)
	}
	t.model.WeightsUpdated() // a skipped step left them alone: the next cast gives the same half copies
	return nil
}

// readFound downloads the found-inf flags of the pending steps.
func (f *scaledSteps) readFound(b tensor.Backend, n int) ([]int32, error) {
	flags := make([]int32, n)
	v, err := f.found.View(0, n)
	if err == nil {
		err = b.Download(flags, v)
	}
	if err != nil {
		return nil, fmt.Errorf("trainer: reading the found-inf flags: %w", err)
	}
	return flags, nil
}

// replayScaled is the host's part of pending FP16 step p, whose found-inf flag was found: what optimizerStep
// does after the optimizer step on the host path, in its order.
func (t *Trainer) replayScaled(p pendingStep, found bool) error {
	r := &t.run
	r.lr, r.scale = t.sched.LR(), t.scaler.Scale()
	skipped, err := t.scaler.UpdateFound(found)
	if err != nil {
		return fmt.Errorf("trainer: step %d: %w", p.step, err)
	}
	if skipped {
		r.skippedSinceLog++
		return t.reportSkipped(p.step, p.epoch, nil)
	}
	r.consecutiveSkips = 0
	if next := t.scaler.Scale(); next != r.scale {
		entry := LogEntry{"step": float64(p.step), "epoch": p.epoch, "loss_scale": float64(r.scale), "next_loss_scale": float64(next)}
		if err := newJSONLWriter(t.args.OutputDir).OnLog(nil, entry); err != nil {
			return err
		}
	}
	t.opt.countStep()
	t.sched.Step()
	return nil
}

// checkScaled compares the device's GradScaler state and step count with the host's replay.
func (t *Trainer) checkScaled(f *scaledSteps) error {
	scale, tracker, steps, err := f.dev.Read()
	if err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	if scale != t.scaler.Scale() || tracker != t.scaler.GrowthTracker() || steps != t.opt.Steps()-f.optStep0 {
		return fmt.Errorf("trainer: internal error, please report it: the device's loss scale %v, growth tracker %d and step count %d differ from the host's replay (%v, %d, %d); TUNE_SYNC_FREE=0 avoids the device path",
			scale, tracker, steps, t.scaler.Scale(), t.scaler.GrowthTracker(), t.opt.Steps()-f.optStep0)
	}
	return nil
}
