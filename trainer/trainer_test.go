package trainer

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestTrainLearnsAndWritesOutputs(t *testing.T) {
	a := testArgs(t)
	a.EvalStrategy = IntervalEpoch
	a.NumTrainEpochs = 4
	m := newBagModel(16, 8, 2, 0.1)
	train, eval := toyTask(64, 16, 1), toyTask(40, 16, 2)
	tr, out, _ := newTestTrainer(t, m, a, train, eval)
	before, err := tr.Evaluate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res := mustTrain(t, tr)
	after, err := tr.Evaluate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("eval before: loss %.4f accuracy %.3f; after: loss %.4f accuracy %.3f", before["eval_loss"], before["eval_accuracy"], after["eval_loss"], after["eval_accuracy"])
	if res.GlobalStep != 64 { // 16 micro-batches per epoch × 4 epochs
		t.Errorf("global_step %d, want 64", res.GlobalStep)
	}
	if !(after["eval_loss"] < before["eval_loss"]-0.05) || after["eval_accuracy"] < 0.8 {
		t.Errorf("did not learn: eval before %v, after %v", before, after)
	}
	logs := trainLogs(tr.State().LogHistory)
	if len(logs) != 64 {
		t.Fatalf("%d training log entries, want one per step (logging_steps 1)", len(logs))
	}
	if logs[0]["step"] != 1 || logs[63]["epoch"] != 4 || logs[15]["epoch"] != 1 {
		t.Errorf("step/epoch bookkeeping: first %v, 16th %v, last %v", logs[0], logs[15], logs[63])
	}
	for _, name := range []string{MetricsName, TrainerStateName, CurveName} {
		if _, err := os.Stat(filepath.Join(a.OutputDir, name)); err != nil {
			t.Errorf("output %s missing: %v", name, err)
		}
	}
	f, _ := os.Open(filepath.Join(a.OutputDir, MetricsName))
	defer f.Close()
	lines := 0
	for sc := bufio.NewScanner(f); sc.Scan(); lines++ {
		var e LogEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("metrics.jsonl line %d: %v", lines+1, err)
		}
	}
	// 64 train entries + 4 epoch evaluations + the final summary (the Evaluate calls outside Train write no file)
	if lines != 64+4+1 {
		t.Errorf("metrics.jsonl has %d lines, want 69", lines)
	}
	if !contains(out.String(), "step 64/64", "eval_accuracy", "train_loss") {
		t.Errorf("plain progress output lacks the expected lines:\n%.2000s", out.String())
	}
	st, err := LoadTrainerState(filepath.Join(a.OutputDir, TrainerStateName))
	if err != nil {
		t.Fatal(err)
	}
	if st.GlobalStep != 64 || st.MaxSteps != 64 || st.BestMetric == nil || st.LoggingSteps != 1 {
		t.Errorf("trainer_state.json: %+v", st)
	}
}

func TestLoggedLearningRateIsTheStepsLR(t *testing.T) {
	// FACTS §3.3 [V]: linear, W=1, T=4 → the logged LRs are 0, 5e-5, 3.33e-5, 1.67e-5.
	a := testArgs(t)
	a.LearningRate = 5e-5
	a.WarmupSteps = 1
	a.MaxSteps = 4
	tr, _, _ := newTestTrainer(t, newBagModel(16, 4, 2, 0), a, toyTask(32, 16, 3), nil)
	mustTrain(t, tr)
	want := []float64{0, 5e-5, 5e-5 * 2 / 3, 5e-5 / 3}
	logs := trainLogs(tr.State().LogHistory)
	for i, w := range want {
		if got := logs[i]["learning_rate"]; math.Abs(got-w) > 1e-15 {
			t.Errorf("step %d: learning_rate %g, want %g", i+1, got, w)
		}
	}
}
