package trainer

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor"
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
	// 64 train entries + 4 epoch evaluations + the final summary + the Evaluate after Train (the one before
	// Train ran before output_dir was set up and logs nowhere but the state)
	if lines != 64+4+1+1 {
		t.Errorf("metrics.jsonl has %d lines, want 70", lines)
	}
	if !contains(out.String(), "step 64/64", "eval_accuracy", "train_loss") {
		t.Errorf("plain progress output lacks the expected lines:\n%.2000s", out.String())
	}
	st, err := LoadTrainerState(filepath.Join(a.OutputDir, TrainerStateName), 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.GlobalStep != 64 || st.MaxSteps != 64 || st.BestMetric != nil || st.LoggingSteps != 1 {
		t.Errorf("trainer_state.json: %+v", st)
	}
}

func TestLoggedLearningRateIsTheStepsLR(t *testing.T) {
	// transformers/optimization.py, checked with transformers 5.17: linear, W=1, T=4 → the logged LRs are 0, 5e-5, 3.33e-5, 1.67e-5.
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

func TestTrainerStateHasTransformersKeys(t *testing.T) {
	a := testArgs(t)
	a.MaxSteps = 2
	tr, _, _ := newTestTrainer(t, newBagModel(16, 4, 2, 0), a, toyTask(8, 16, 27), nil)
	mustTrain(t, tr)
	data, err := os.ReadFile(filepath.Join(a.OutputDir, TrainerStateName))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	// _save_checkpoint in transformers' trainer.py: the keys transformers 5.17 writes.
	want := []string{"best_global_step", "best_metric", "best_model_checkpoint", "epoch", "eval_steps", "global_step",
		"is_hyper_param_search", "is_local_process_zero", "is_world_process_zero", "log_history", "logging_steps",
		"max_steps", "num_input_tokens_seen", "num_train_epochs", "save_steps", "stateful_callbacks", "total_flos",
		"train_batch_size", "trial_name", "trial_params"}
	for _, k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("trainer_state.json lacks %q", k)
		}
	}
	if len(got) != len(want) {
		t.Errorf("trainer_state.json has %d keys, want %d: %s", len(got), len(want), data)
	}
	var entry map[string]any
	var hist []json.RawMessage
	json.Unmarshal(got["log_history"], &hist)
	json.Unmarshal(hist[0], &entry)
	for _, k := range []string{"loss", "grad_norm", "learning_rate", "epoch", "step"} {
		if _, ok := entry[k]; !ok {
			t.Errorf("log_history[0] lacks %q: %v", k, entry)
		}
	}
}

func TestLogEntryJSON(t *testing.T) {
	tests := []struct {
		name string
		in   LogEntry
		want string
	}{
		{"keys sorted, integers without a decimal point", LogEntry{"step": 3, "loss": 0.5, "epoch": 1}, `{"epoch":1,"loss":0.5,"step":3}`},
		{"non-finite values become null", LogEntry{"grad_norm": math.Inf(1), "loss": math.NaN()}, `{"grad_norm":null,"loss":null}`},
		{"shortest round-trip formatting", LogEntry{"learning_rate": 3.3333333333333335e-05}, `{"learning_rate":3.3333333333333335e-05}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.in)
			if err != nil || string(b) != tt.want {
				t.Fatalf("got %s (%v), want %s", b, err, tt.want)
			}
			var back LogEntry
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.in {
				if w := back[k]; w != v && !(math.IsNaN(w) && (math.IsNaN(v) || math.IsInf(v, 0))) {
					t.Errorf("%s read back as %v, want %v", k, w, v)
				}
			}
		})
	}
}

func TestPredictUnlabelled(t *testing.T) {
	a := testArgs(t)
	tr, _, _ := newTestTrainer(t, newBagModel(16, 4, 3, 0), a, nil, nil)
	ds := toyTask(7, 16, 28)
	ds.labels = nil
	out, err := tr.Predict(context.Background(), ds)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Logits) != 7*3 || out.NumLabels != 3 || out.Labels != nil || len(out.Predictions()) != 7 {
		t.Errorf("prediction output %+v", out)
	}
	if _, ok := out.Metrics["test_loss"]; ok {
		t.Errorf("unlabelled prediction reports test_loss: %v", out.Metrics)
	}
}

func TestNewErrors(t *testing.T) {
	half := newScriptModel(2, nil, nil)
	half.grads, _ = half.b.Alloc(tensor.F16, 2)
	tests := []struct {
		name  string
		model Model
		edit  func(a *TrainingArguments)
		eval  Dataset
		want  string
	}{
		{"no model", nil, func(*TrainingArguments) {}, nil, "model is nil"},
		{"fp16 and bf16 together (bf16 without loss scaling, torch.amp's GradScaler is for float16)", newBagModel(4, 2, 2, 0), func(a *TrainingArguments) { a.FP16, a.BF16 = true, true }, nil, "fp16 and bf16"},
		{"evaluation without an eval set", newBagModel(4, 2, 2, 0), func(a *TrainingArguments) { a.EvalStrategy = IntervalEpoch }, nil, "needs an eval dataset"},
		{"FP16 loss scaling over half-precision gradients fails at startup (GradScaler's refusal of FP16 gradients, torch/amp/grad_scaler.py)", half, func(a *TrainingArguments) { a.FP16 = true }, nil, "Attempting to unscale FP16 gradients"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := testArgs(t)
			tt.edit(&a)
			_, err := New(tt.model, a, toyTask(4, 4, 1), tt.eval)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}
