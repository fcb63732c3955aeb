package trainer

import (
	"io"
	"strings"
	"testing"
)

// TestTerminalProgress draws the terminal display into a buffer: each logged step's line is kept above the bar
// (the loss history stays visible), an evaluation draws its own bar with the examples done (it sat silently at
// 100%), and bf16 logs carry no loss scale (it printed "scale 1").
func TestTerminalProgress(t *testing.T) {
	old := isTerminal
	isTerminal = func(io.Writer) bool { return true }
	defer func() { isTerminal = old }()
	a := testArgs(t)
	a.EvalStrategy, a.EvalSteps = IntervalSteps, 8
	a.LoggingSteps = 4
	a.NumTrainEpochs = 1
	a.BF16 = true
	m := newBagModel(16, 8, 2, 0.1)
	tr, out, _ := newTestTrainer(t, m, a, toyTask(64, 16, 1), toyTask(40, 16, 2))
	mustTrain(t, tr)
	s := out.String()
	for _, want := range []string{"step 4/16  epoch 0.25  loss ", "step 8/16  epoch 0.50  loss ", "step 16/16  epoch 1.00  loss ",
		"eval   0% |", "eval 100% |", "(40/40)", "eval_loss"} {
		if !strings.Contains(s, want) {
			t.Errorf("the terminal output lacks %q:\n%.3000s", want, s)
		}
	}
	if strings.Contains(s, "scale") {
		t.Errorf("bf16 shows a loss scale:\n%.2000s", s)
	}
	for _, l := range trainLogs(tr.State().LogHistory) {
		if _, ok := l["loss_scale"]; ok {
			t.Errorf("bf16 log entry with loss_scale: %v", l)
		}
	}
}
