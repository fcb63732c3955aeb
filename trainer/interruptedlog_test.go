package trainer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRerunKeepsTheInterruptedLog: a run interrupted before its first checkpoint leaves its metrics.jsonl in
// output_dir, and the same run again was refused ("already holds a training run"), with overwrite_output_dir
// too ("is not the output of a training run"), while the interruption said a new run starts from the
// beginning. The new run now starts and keeps the old log as metrics.jsonl.1 (then .2, ...), byte for byte,
// with overwrite_output_dir or without; its own metrics.jsonl holds its steps alone.
func TestRerunKeepsTheInterruptedLog(t *testing.T) {
	dir := t.TempDir()
	args := func(overwrite bool) TrainingArguments {
		a := resumeArgs(t, dir)
		a.SaveStrategy, a.LoggingSteps, a.OverwriteOutputDir = IntervalNo, 1, overwrite
		return a
	}
	interrupt := func(overwrite bool) []byte {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		tr, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), args(overwrite), toyTask(20, 16, 11), nil,
			WithCallbacks(&stopAtStepEnd{step: 3, cancel: cancel}))
		_, err := tr.Train(ctx)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "no checkpoint was saved in "+dir) ||
			!strings.Contains(err.Error(), "the same command does, keeping this run's metrics.jsonl as metrics.jsonl.N") {
			t.Fatalf("interrupted run: %v", err)
		}
		log, err := os.ReadFile(filepath.Join(dir, MetricsName))
		if err != nil || strings.Count(string(log), "\n") != 3 {
			t.Fatalf("the interrupted run's metrics.jsonl: %v\n%s", err, log)
		}
		return log
	}
	first := interrupt(false)
	second := interrupt(false) // the first is kept as metrics.jsonl.1
	third := interrupt(true)   // and the second as .2, with overwrite_output_dir as without
	tr, _, logs := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), args(false), toyTask(20, 16, 11), nil)
	mustTrain(t, tr)
	if want := dir + " held only the metrics.jsonl of a run stopped before its first checkpoint: kept as metrics.jsonl.3"; !strings.Contains(logs.String(), want) {
		t.Errorf("the run's log does not say %q:\n%s", want, logs.String())
	}
	for i, want := range [][]byte{first, second, third} {
		p := filepath.Join(dir, MetricsName+"."+string(rune('1'+i)))
		if got, err := os.ReadFile(p); err != nil || string(got) != string(want) {
			t.Errorf("%s: %v\n%s\nwant\n%s", p, err, got, want)
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, MetricsName))
	if n := strings.Count(string(log), `"loss":`); n != 9 || !strings.Contains(string(log), `"step":1}`) {
		t.Errorf("the new run's metrics.jsonl has %d training logs, want its 9 steps alone:\n%s", n, log)
	}
	// The folder is now a finished run's: a new run without overwrite_output_dir is refused as before.
	again, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), args(false), toyTask(20, 16, 11), nil)
	if _, err := again.Train(context.Background()); !errors.Is(err, ErrOutputDirInUse) {
		t.Errorf("a run into the finished run's folder: %v, want ErrOutputDirInUse", err)
	}
}

// halfSave leaves a checkpoint-N folder without a manifest at step, as a save interrupted midway does, and
// then cancels the run.
type halfSave struct {
	CallbackBase
	step   int
	cancel context.CancelFunc
}

func (h *halfSave) OnStepEnd(e *Event) error {
	if e.State.GlobalStep == h.step {
		ck := filepath.Join(e.Args.OutputDir, CheckpointPrefix+"2")
		os.Mkdir(ck, 0o755)
		os.WriteFile(filepath.Join(ck, OptimizerName), []byte("part"), 0o644)
		h.cancel()
	}
	return nil
}

// TestInterruptSaysWhatTheRerunDoes: the interruption's advice follows what a new run there would find: only
// this run's metrics.jsonl (the same command, which keeps it), nothing (the same command), or a checkpoint
// folder left incomplete, which a new run refuses (another output_dir, or remove it).
func TestInterruptSaysWhatTheRerunDoes(t *testing.T) {
	for _, c := range []struct {
		name    string
		logging float64
		half    bool
		want    string
	}{
		{"a log", 1, false, "so a new run starts from the beginning: the same command does, keeping this run's metrics.jsonl as metrics.jsonl.N"},
		{"no log yet", 100, false, "so a new run starts from the beginning: the same command does"},
		{"an incomplete checkpoint", 1, true, "so a new run starts from the beginning: give it another output_dir, or remove "},
	} {
		dir := t.TempDir()
		a := resumeArgs(t, dir)
		a.SaveStrategy, a.LoggingSteps = IntervalNo, c.logging
		ctx, cancel := context.WithCancel(context.Background())
		var cb Callback = &stopAtStepEnd{step: 2, cancel: cancel}
		if c.half {
			cb = &halfSave{step: 2, cancel: cancel}
		}
		tr, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), a, toyTask(20, 16, 11), nil, WithCallbacks(cb))
		_, err := tr.Train(ctx)
		cancel()
		if !errors.Is(err, context.Canceled) || !strings.HasSuffix(err.Error(), c.want+map[bool]string{true: dir + " first"}[c.half]) {
			t.Errorf("%s: %v; want it to end with %q", c.name, err, c.want)
		}
		// What it says holds: the same arguments again train, or are refused.
		again, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), a, toyTask(20, 16, 11), nil)
		if _, err := again.Train(context.Background()); (err == nil) == c.half {
			t.Errorf("%s: the same run again: %v", c.name, err)
		}
	}
}
