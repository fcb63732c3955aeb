package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/amp"
)

// stopAfterSave cancels the run's context once a checkpoint at step is saved: Train then returns at the start
// of the next step, as a run killed after its save would stop.
type stopAfterSave struct {
	CallbackBase
	step   int
	cancel context.CancelFunc
}

func (s *stopAfterSave) OnSave(e *Event, _ string) error {
	if e.State.GlobalStep == s.step {
		s.cancel()
	}
	return nil
}

// resumeArgs is the configuration of the resume tests: shuffled data, dropout, GA 2 with a short last window,
// linear warmup and decay, weight decay, an epoch boundary inside the run.
func resumeArgs(t *testing.T, dir string) TrainingArguments {
	a := testArgs(t)
	a.OutputDir = dir
	a.PerDeviceTrainBatchSize, a.GradientAccumulationSteps = 3, 2
	a.MaxSteps, a.WarmupSteps, a.WeightDecay = 9, 2, 0.01
	a.SaveStrategy, a.SaveSteps = IntervalSteps, 4
	return a
}

func weights(m *bagModel) []float32 { return m.host(m.params) }

// TestResumeIsBitIdentical: a run stopped after its checkpoint at step 4 and resumed in a fresh Trainer and
// model ends with exactly the weights (and logs) of an uninterrupted run, and logs which checkpoint it resumed
// from. 20 examples in micro-batches of 3
// give 7 micro-batches, 4 optimizer steps per epoch, so the resumed part crosses an epoch boundary.
func TestResumeIsBitIdentical(t *testing.T) {
	data := toyTask(20, 16, 11)
	full := newBagModel(16, 6, 2, 0.2)
	trFull, _, _ := newTestTrainer(t, full, resumeArgs(t, t.TempDir()), data, nil)
	mustTrain(t, trFull)

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	first, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0.2), resumeArgs(t, dir), data, nil,
		WithCallbacks(&stopAfterSave{step: 4, cancel: cancel}))
	if _, err := first.Train(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run returned %v, want context.Canceled", err)
	} else if want := filepath.Join(dir, "checkpoint-4") + " (step 4) holds the run: resume_from_checkpoint=true"; !strings.Contains(err.Error(), want) {
		// The interruption names the checkpoint that survives and how to resume (it said only "context canceled").
		t.Errorf("interrupted run: %v; want %q", err, want)
	} else if !strings.Contains(err.Error(), "command line: training.resume_from_checkpoint=true)") {
		// It said "(training.resume_from_checkpoint=true in a recipe)": that is the override's syntax, not a recipe's.
		t.Errorf("interrupted run: %v; want the command-line override named as such", err)
	} else if strings.Contains(err.Error(), "context canceled") {
		t.Errorf("interrupted run: %v: Go's \"context canceled\" is no help to a user", err)
	}
	a := resumeArgs(t, dir)
	a.ResumeFromCheckpoint = "true"
	resumed := newBagModel(16, 6, 2, 0.2)
	trRes, _, logs := newTestTrainer(t, resumed, a, data, nil)
	mustTrain(t, trRes)
	if want := "resuming from " + filepath.Join(dir, "checkpoint-4") + " (global step 4)"; !strings.Contains(logs.String(), want) {
		t.Errorf("the resumed run's log does not say %q:\n%s", want, logs.String())
	}

	if w, r := weights(full), weights(resumed); !slices.Equal(w, r) {
		i := 0
		for w[i] == r[i] {
			i++
		}
		t.Fatalf("resumed weights differ from the uninterrupted run's: element %d is %v, uninterrupted %v", i, r[i], w[i])
	}
	fl, rl := trainLogs(trFull.State().LogHistory), trainLogs(trRes.State().LogHistory)
	if len(fl) != 9 || len(rl) != 9 {
		t.Fatalf("%d and %d training logs, want 9", len(fl), len(rl))
	}
	for i := range fl {
		for _, k := range []string{"loss", "learning_rate", "grad_norm", "epoch", "step"} {
			if fl[i][k] != rl[i][k] {
				t.Errorf("step %d %s: uninterrupted %v, resumed %v", i+1, k, fl[i][k], rl[i][k])
			}
		}
	}
	if full.saves == 0 || resumed.saves == 0 {
		t.Error("no checkpoint was saved")
	}
}

// TestB33GradScalerStateSavedAndRestored: the GradScaler state across a resume (GradScaler.state_dict in torch/amp/grad_scaler.py). An FP16 run with init_scale 256 saves scale 256 and
// growth tracker 5 after 5 clean steps; a fresh Trainer (whose own scaler would start at 65536) resumes with 256
// and continues exactly like the uninterrupted run. Resuming from a checkpoint without scaler state warns.
func TestB33GradScalerStateSavedAndRestored(t *testing.T) {
	data := toyTask(24, 16, 13)
	args := func(dir string) TrainingArguments {
		a := testArgs(t)
		a.OutputDir, a.FP16, a.MaxSteps = dir, true, 8
		a.SaveStrategy, a.SaveSteps = IntervalSteps, 5
		return a
	}
	init256 := amp.DefaultGradScalerOptions()
	init256.InitScale = 256

	full := newBagModel(16, 6, 2, 0.1)
	trFull, _, _ := newTestTrainer(t, full, args(t.TempDir()), data, nil, WithGradScalerOptions(init256))
	mustTrain(t, trFull)

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	first, _, _ := newTestTrainer(t, newBagModel(16, 6, 2, 0.1), args(dir), data, nil,
		WithGradScalerOptions(init256), WithCallbacks(&stopAfterSave{step: 5, cancel: cancel}))
	if _, err := first.Train(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run returned %v", err)
	}
	ck := filepath.Join(dir, "checkpoint-5")
	var saved map[string]any
	data5, err := os.ReadFile(filepath.Join(ck, ScalerName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data5, &saved); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"scale": 256.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000.0, "_growth_tracker": 5.0}
	for k, v := range want {
		if saved[k] != v {
			t.Errorf("scaler.json %s = %v, want %v", k, saved[k], v)
		}
	}

	a := args(dir)
	a.ResumeFromCheckpoint = ck
	resumed := newBagModel(16, 6, 2, 0.1)
	trRes, _, _ := newTestTrainer(t, resumed, a, data, nil) // default scaler options: init_scale 65536
	if got := trRes.Scaler().Scale(); got != 65536 {
		t.Fatalf("a fresh scaler reports %v, want 65536", got)
	}
	mustTrain(t, trRes)
	if got := trRes.Scaler().Scale(); got != 256 || trRes.Scaler().GrowthTracker() != 8 {
		t.Errorf("after resuming and 3 more steps: scale %v tracker %d, want 256 and 8", got, trRes.Scaler().GrowthTracker())
	}
	fl, rl := trainLogs(trFull.State().LogHistory), trainLogs(trRes.State().LogHistory)
	for i := 5; i < 8; i++ {
		for _, k := range []string{"loss", "learning_rate", "loss_scale"} {
			if fl[i][k] != rl[i][k] {
				t.Errorf("step %d %s: uninterrupted %v, resumed %v", i+1, k, fl[i][k], rl[i][k])
			}
		}
	}
	if !slices.Equal(weights(full), weights(resumed)) {
		t.Error("resumed fp16 weights differ from the uninterrupted run's")
	}

	// The same checkpoint without scaler.json: the resume works and warns.
	if err := os.Remove(filepath.Join(ck, ScalerName)); err != nil {
		t.Fatal(err)
	}
	if err := WriteCheckpointManifest(ck); err != nil { // as a run that wrote no scaler state would list it
		t.Fatal(err)
	}
	a.OutputDir = t.TempDir()
	trWarn, _, logs := newTestTrainer(t, newBagModel(16, 6, 2, 0.1), a, data, nil)
	mustTrain(t, trWarn)
	if !contains(logs.String(), "level=WARN", "without GradScaler state") {
		t.Errorf("no warning about the missing scaler state; log:\n%s", logs.String())
	}
}

// TestInterruptedSaveKeepsPreviousCheckpoint: a failure between two files of a checkpoint (as a crash there
// would leave it) leaves no checkpoint-4, keeps checkpoint-2 complete, and a resume from "latest" continues
// from checkpoint-2 after removing the leftover temporary directory.
func TestInterruptedSaveKeepsPreviousCheckpoint(t *testing.T) {
	dir := t.TempDir()
	a := testArgs(t)
	a.OutputDir, a.MaxSteps, a.SaveStrategy, a.SaveSteps = dir, 6, IntervalSteps, 2
	crash := errors.New("simulated crash")
	saves := 0
	checkpointHook = func(stage string) error {
		if stage == "model" {
			saves++
		}
		if saves == 2 && stage == "scheduler" {
			return crash
		}
		return nil
	}
	t.Cleanup(func() { checkpointHook = nil })
	data := toyTask(30, 16, 17)
	tr, _, _ := newTestTrainer(t, newBagModel(16, 4, 2, 0), a, data, nil)
	if _, err := tr.Train(context.Background()); !errors.Is(err, crash) {
		t.Fatalf("Train returned %v, want the simulated crash", err)
	} else if !strings.Contains(err.Error(), "the last good checkpoint, checkpoint-2, is kept") {
		t.Errorf("Train returned %q, want it to name checkpoint-2 as the one kept", err)
	}
	checkpointHook = nil
	cps, _ := Checkpoints(dir)
	if len(cps) != 1 || filepath.Base(cps[0]) != "checkpoint-2" {
		t.Fatalf("checkpoints after the failed save: %v, want only checkpoint-2", cps)
	}
	for _, f := range []string{"model.json", OptimizerName, SchedulerName, RNGStateName, TrainingArgsName, TrainerStateName} {
		if _, err := os.Stat(filepath.Join(cps[0], f)); err != nil {
			t.Errorf("checkpoint-2 lacks %s", f)
		}
	}
	a.ResumeFromCheckpoint = "latest"
	trRes, _, _ := newTestTrainer(t, newBagModel(16, 4, 2, 0), a, data, nil)
	out := mustTrain(t, trRes)
	if out.GlobalStep != 6 || trainLogs(trRes.State().LogHistory)[2]["step"] != 3 {
		t.Errorf("resumed run ended at %d with history %v", out.GlobalStep, trRes.State().LogHistory)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			t.Errorf("temporary directory %s left behind", e.Name())
		}
	}
}

// scriptedMetric returns a MetricsFunc reporting values[i] as "accuracy" at the i-th evaluation.
func scriptedMetric(values ...float64) MetricsFunc {
	i := 0
	return func(EvalPrediction) map[string]float64 {
		v := values[min(i, len(values)-1)]
		i++
		return map[string]float64{"accuracy": v}
	}
}

func TestSaveTotalLimitKeepsBest(t *testing.T) {
	tests := []struct {
		name  string
		limit int
		want  []string
	}{
		{"limit 2 keeps the best (step 2) and the newest", 2, []string{"checkpoint-2", "checkpoint-5"}},
		{"limit 1 keeps the best and the newest, as transformers does", 1, []string{"checkpoint-2", "checkpoint-5"}},
		{"limit 3 keeps the best and the two newest", 3, []string{"checkpoint-2", "checkpoint-4", "checkpoint-5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := testArgs(t)
			a.MaxSteps, a.SaveTotalLimit = 5, tt.limit
			a.EvalStrategy, a.EvalSteps, a.SaveStrategy, a.SaveSteps = IntervalSteps, 1, IntervalSteps, 1
			a.MetricForBestModel, a.LoadBestModelAtEnd = "accuracy", true
			m := newBagModel(16, 4, 2, 0)
			tr, _, _ := newTestTrainer(t, m, a, toyTask(24, 16, 19), toyTask(8, 16, 20),
				WithComputeMetrics(scriptedMetric(0.5, 0.9, 0.6, 0.7, 0.8)))
			mustTrain(t, tr)
			cps, _ := Checkpoints(a.OutputDir)
			var names []string
			for _, c := range cps {
				names = append(names, filepath.Base(c))
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("checkpoints %v, want %v", names, tt.want)
			}
			st := tr.State()
			if st.BestGlobalStep == nil || *st.BestGlobalStep != 2 || *st.BestMetric != 0.9 ||
				filepath.Base(*st.BestModelCheckpoint) != "checkpoint-2" {
				t.Errorf("best: step %v metric %v checkpoint %v", st.BestGlobalStep, st.BestMetric, st.BestModelCheckpoint)
			}
			// load_best_model_at_end restored checkpoint-2's weights.
			best := newBagModel(16, 4, 2, 0)
			if err := best.Load(*st.BestModelCheckpoint); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(weights(best), weights(m)) {
				t.Error("the model at the end is not the best checkpoint's")
			}
		})
	}
}

func TestEarlyStopping(t *testing.T) {
	tests := []struct {
		name      string
		threshold float64
		metrics   []float64
		wantStep  int
	}{
		{"stops after 2 evaluations without improvement", 0, []float64{0.5, 0.6, 0.55, 0.58, 0.9}, 4},
		{"an improvement below the threshold does not count", 0.05, []float64{0.5, 0.6, 0.62, 0.64, 0.9}, 4},
		{"improvements reset the counter", 0, []float64{0.5, 0.6, 0.55, 0.7, 0.65, 0.8, 0.9, 0.95}, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := testArgs(t)
			a.MaxSteps, a.EvalStrategy, a.EvalSteps = 8, IntervalSteps, 1
			a.MetricForBestModel, a.EarlyStoppingPatience, a.EarlyStoppingThreshold = "accuracy", 2, tt.threshold
			tr, _, _ := newTestTrainer(t, newBagModel(16, 4, 2, 0), a, toyTask(40, 16, 21), toyTask(8, 16, 22),
				WithComputeMetrics(scriptedMetric(tt.metrics...)))
			out := mustTrain(t, tr)
			if out.GlobalStep != tt.wantStep {
				t.Errorf("stopped at step %d, want %d", out.GlobalStep, tt.wantStep)
			}
		})
	}
}

// TestFinalCheckpointHoldsTheEpochEvaluation: when the last step ends an epoch, the checkpoint asked for at
// max_steps is written again after the epoch's evaluation (as transformers overwrites it), so it records that
// evaluation and save_total_limit 1 keeps only it when it is the best.
func TestFinalCheckpointHoldsTheEpochEvaluation(t *testing.T) {
	a := testArgs(t)
	a.NumTrainEpochs, a.SaveTotalLimit = 2, 1
	a.EvalStrategy, a.SaveStrategy = IntervalEpoch, IntervalEpoch
	a.MetricForBestModel = "accuracy"
	m := newBagModel(16, 4, 2, 0)
	tr, _, _ := newTestTrainer(t, m, a, toyTask(16, 16, 25), toyTask(8, 16, 26), WithComputeMetrics(scriptedMetric(0.5, 0.8)))
	mustTrain(t, tr)
	cps, _ := Checkpoints(a.OutputDir)
	if len(cps) != 1 || filepath.Base(cps[0]) != "checkpoint-8" {
		t.Fatalf("checkpoints %v, want only checkpoint-8", cps)
	}
	st, err := LoadTrainerState(filepath.Join(cps[0], TrainerStateName), 0)
	if err != nil {
		t.Fatal(err)
	}
	last := st.LogHistory[len(st.LogHistory)-1]
	if st.BestModelCheckpoint == nil || filepath.Base(*st.BestModelCheckpoint) != "checkpoint-8" || last["eval_accuracy"] != 0.8 {
		t.Errorf("checkpoint-8's state: best %v, last log %v", st.BestModelCheckpoint, last)
	}
	if m.saves != 3 { // epoch 1, step 8, step 8 again after the evaluation
		t.Errorf("model saved %d times, want 3", m.saves)
	}
}
