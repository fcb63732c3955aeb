package trainer

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/badinput"
)

// TestResumeKeepsTheOpenLoggingWindow: a checkpoint between two logs (save_steps 3, logging_steps 4) used to
// drop the steps since the last log: the first log after the resume covered only the steps after it, and
// train_loss left them out (findings5 #8: step 50's loss 0.69379 vs 0.69518, train_loss 0.693302 vs
// 0.693699 on the tiny recipe). The window is saved with the data position (DataState) and goes on: every
// logged loss is the uninterrupted run's, bit for bit, and train_loss equals it up to summation order.
func TestResumeKeepsTheOpenLoggingWindow(t *testing.T) {
	data := toyTask(20, 16, 11)
	args := func(dir string) TrainingArguments {
		a := resumeArgs(t, dir)
		a.MaxSteps, a.SaveSteps = 12, 3
		a.LoggingStrategy, a.LoggingSteps = IntervalSteps, 4
		return a
	}
	full := newBagModel(16, 6, 2, 0.2)
	trFull, _, _ := newTestTrainer(t, full, args(t.TempDir()), data, nil)
	outFull := mustTrain(t, trFull)

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	first, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), args(dir), data, nil,
		WithCallbacks(&stopAfterSave{step: 6, cancel: cancel}))
	if _, err := first.Train(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run returned %v", err)
	}
	a := args(dir)
	a.ResumeFromCheckpoint = "true"
	trRes, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), a, data, nil)
	outRes := mustTrain(t, trRes)

	fl, rl := trainLogs(trFull.State().LogHistory), trainLogs(trRes.State().LogHistory)
	if len(fl) != 3 || len(rl) != 3 {
		t.Fatalf("%d and %d training logs, want 3 (steps 4, 8, 12)", len(fl), len(rl))
	}
	for i := range fl {
		if fl[i]["loss"] != rl[i]["loss"] || fl[i]["step"] != rl[i]["step"] {
			t.Errorf("log %d: uninterrupted step %v loss %v, resumed step %v loss %v", i, fl[i]["step"], fl[i]["loss"], rl[i]["step"], rl[i]["loss"])
		}
	}
	if d := math.Abs(outFull.TrainingLoss - outRes.TrainingLoss); d > 1e-12*math.Abs(outFull.TrainingLoss) {
		t.Errorf("train_loss: uninterrupted %v, resumed %v", outFull.TrainingLoss, outRes.TrainingLoss)
	}
}

// TestResumeOnOtherData: a resume whose training set changed was silent when the position fit it and failed
// with "data position: position epoch 0, micro-batch 6 does not fit ..." when it did not (findings5 #9). The
// checkpoint records the run's example count: another count is warned about, and a position the new set does
// not have is bad input saying that the data differ.
func TestResumeOnOtherData(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	a := resumeArgs(t, dir)
	a.SaveSteps = 2
	first, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), a, toyTask(20, 16, 11), nil,
		WithCallbacks(&stopAfterSave{step: 2, cancel: cancel})) // epoch 0, micro-batch 4 of 7
	if _, err := first.Train(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run returned %v", err)
	}
	resume := func(n int) (*Trainer, *logCapture) {
		b := resumeArgs(t, t.TempDir())
		b.ResumeFromCheckpoint = filepath.Join(dir, "checkpoint-2")
		tr, _, logs := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), b, toyTask(n, 16, 11), nil)
		return tr, logs
	}
	fewer, _ := resume(3) // one micro-batch per epoch
	_, err := fewer.Train(context.Background())
	if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), "the training data differ from the checkpoint's run (that run had 20 examples, this one has 3)") ||
		strings.Contains(err.Error(), "position: position") {
		t.Errorf("a smaller training set: %v", err)
	}
	more, logs := resume(40)
	mustTrain(t, more)
	if want := "the training set has 40 examples, the checkpoint's run had 20"; !strings.Contains(logs.String(), want) {
		t.Errorf("a larger training set: no warning %q:\n%s", want, logs.String())
	}
}
