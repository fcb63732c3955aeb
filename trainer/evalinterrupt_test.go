package trainer

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// stopAtStepEnd cancels the run's context at the end of step, before that step's evaluation.
type stopAtStepEnd struct {
	CallbackBase
	step   int
	cancel context.CancelFunc
}

func (s *stopAtStepEnd) OnStepEnd(e *Event) error {
	if e.State.GlobalStep == s.step {
		s.cancel()
	}
	return nil
}

// TestInterruptedEvaluationSaysWhatToDo: a Ctrl-C during an evaluation gives the interruption's message (where
// the run stopped, which checkpoint holds it), not the bare "eval interrupted: context canceled" (tester4).
func TestInterruptedEvaluationSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	a := resumeArgs(t, dir)
	a.EvalStrategy, a.EvalSteps = IntervalSteps, 4
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	data := toyTask(20, 16, 11)
	tr, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), a, data, toyTask(8, 16, 12),
		WithCallbacks(&stopAtStepEnd{step: 4, cancel: cancel}))
	_, err := tr.Train(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "training interrupted in the evaluation after step 4") ||
		!strings.Contains(msg, "no checkpoint was saved") || strings.Contains(msg, "context canceled") ||
		!strings.Contains(msg, "the same command does, keeping this run's metrics.jsonl as metrics.jsonl.N") { // what to do next (findings6 #5)
		t.Errorf("got %q", msg)
	}
}
