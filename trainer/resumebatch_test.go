package trainer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResumeWithAnotherBatchSizeReachesMaxSteps: `tune finetune tiny training.max_steps=400
// training.resume_from_checkpoint=true training.per_device_train_batch_size=16` on a checkpoint of batch 32 at
// step 200 stopped at step 375 ("step 375/400"): the restored data position (epoch 1, micro-batch 75 of the old
// batch size) ran out of the epochs the new batch size gives max_steps. As transformers does when the batch
// size changes, the position is now derived from global_step, and the run reaches max_steps. Here batch 8 (5
// micro-batches an epoch) stops at step 15 (epoch 3) and resumes at batch 4 (10 an epoch, 3 epochs for 30
// steps), where the old position left no epoch to run at all.
func TestResumeWithAnotherBatchSizeReachesMaxSteps(t *testing.T) {
	tr, logs := interruptAndResume(t, 15, func(a *TrainingArguments, resumed bool) {
		a.PerDeviceTrainBatchSize, a.MaxSteps, a.SaveSteps = 8, 30, 15
		if resumed {
			a.PerDeviceTrainBatchSize = 4
		}
	})
	if got := tr.State().GlobalStep; got != 30 {
		t.Fatalf("the resumed run stopped at step %d, want max_steps 30", got)
	}
	if !strings.Contains(logs, "per_device_train_batch_size") {
		t.Errorf("no warning about the changed batch size:\n%s", logs)
	}
}

// TestResumeWithAnotherAccumulationReachesMaxSteps: a checkpoint of gradient_accumulation_steps 4 at step 200
// resumed with 1 and max_steps 400 trained nothing and ended with exit 0 ("trained steps 201-200 ... over the
// run's 200 steps"): its position, epoch 6, was past the 4 epochs the new accumulation gives 400 steps. Here GA 4
// (3 steps an epoch over 10 micro-batches) stops at step 9 (epoch 3) and resumes with GA 1 (10 steps an epoch, 2
// epochs for max_steps 20).
func TestResumeWithAnotherAccumulationReachesMaxSteps(t *testing.T) {
	tr, logs := interruptAndResume(t, 9, func(a *TrainingArguments, resumed bool) {
		a.GradientAccumulationSteps, a.MaxSteps, a.SaveSteps = 4, 20, 9
		if resumed {
			a.GradientAccumulationSteps = 1
		}
	})
	if got := tr.State().GlobalStep; got != 20 {
		t.Fatalf("the resumed run stopped at step %d, want max_steps 20", got)
	}
	if !strings.Contains(logs, "gradient_accumulation_steps 1") {
		t.Errorf("no warning about the data position:\n%s", logs)
	}
}

// interruptAndResume trains the bag model on a toy task with checkpoints every few steps (set saves the sizes,
// resumed false), stops the run after the checkpoint of step stop, then resumes it from output_dir with the
// arguments set gives for resumed true, and returns the finished resumed trainer and its log.
func interruptAndResume(t *testing.T, stop int, set func(a *TrainingArguments, resumed bool)) (*Trainer, string) {
	t.Helper()
	data := toyTask(40, 16, 11)
	dir := t.TempDir()
	args := func(resumed bool) TrainingArguments {
		a := testArgs(t)
		a.OutputDir, a.SaveStrategy = dir, IntervalSteps
		set(&a, resumed)
		return a
	}
	ctx, cancel := context.WithCancel(context.Background())
	first, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0), args(false), data, nil,
		WithCallbacks(&stopAfterSave{step: stop, cancel: cancel}))
	if _, err := first.Train(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run returned %v, want context.Canceled", err)
	}
	a := args(true)
	a.ResumeFromCheckpoint = "true"
	tr, _, logs := newTestTrainer(t, newBagModel(16, 6, 2, 0), a, data, nil)
	mustTrain(t, tr)
	return tr, logs.String()
}

// TestResumeNamesTheCheckpointBeforeACorruptOne: resume_from_checkpoint=true on an output_dir whose newest
// checkpoint no longer matches its manifest (a byte changed in optimizer.safetensors) is refused, and now names the
// newest other complete checkpoint to resume from instead.
func TestResumeNamesTheCheckpointBeforeACorruptOne(t *testing.T) {
	data := toyTask(40, 16, 11)
	dir := t.TempDir()
	a := testArgs(t)
	a.OutputDir, a.MaxSteps, a.SaveStrategy, a.SaveSteps, a.SaveTotalLimit = dir, 6, IntervalSteps, 3, 0
	mustTrain(t, func() *Trainer { tr, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0), a, data, nil); return tr }())
	p := filepath.Join(dir, "checkpoint-6", "optimizer.safetensors")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	a.MaxSteps, a.ResumeFromCheckpoint = 9, "true"
	tr, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0), a, data, nil)
	_, err = tr.Train(context.Background())
	want := "resume_from_checkpoint=" + filepath.Join(dir, "checkpoint-3")
	if err == nil || !strings.Contains(err.Error(), "SHA-256") || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v; want the corrupt checkpoint refused and %q named", err, want)
	}
}
