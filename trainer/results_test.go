package trainer

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSaveMetrics: train_results.json, eval_results.json and all_results.json as transformers'
// save_metrics writes them (sorted keys, four-space indent, all_results merged).
func TestSaveMetrics(t *testing.T) {
	dir := t.TempDir()
	if err := SaveMetrics(dir, "train", map[string]float64{"train_loss": 0.5, "epoch": 1}); err != nil {
		t.Fatal(err)
	}
	if err := SaveMetrics(dir, "eval", map[string]float64{"eval_loss": 0.25, "eval_accuracy": 0.9, "epoch": 1}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "train_results.json"))
	if want := "{\n    \"epoch\": 1,\n    \"train_loss\": 0.5\n}\n"; string(b) != want {
		t.Errorf("train_results.json:\n%s\nwant\n%s", b, want)
	}
	var all map[string]float64
	b, _ = os.ReadFile(filepath.Join(dir, AllResultsName))
	if err := json.Unmarshal(b, &all); err != nil || len(all) != 4 || all["train_loss"] != 0.5 || all["eval_accuracy"] != 0.9 {
		t.Errorf("all_results.json %s (%v)", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "eval_results.json")); err != nil {
		t.Error(err)
	}
}

// TestStateWithoutBestMetric: without metric_for_best_model (and load_best_model_at_end) trainer_state.json
// has best_metric and best_global_step null, as transformers writes it; with it they are set.
func TestStateWithoutBestMetric(t *testing.T) {
	for _, metric := range []string{"", "accuracy"} {
		a := testArgs(t)
		a.EvalStrategy, a.SaveStrategy = IntervalEpoch, IntervalEpoch
		a.MetricForBestModel = metric
		tr, _, _ := newTestTrainer(t, newBagModel(16, 8, 2, 0.1), a, toyTask(32, 16, 1), toyTask(20, 16, 2))
		mustTrain(t, tr)
		b, err := os.ReadFile(filepath.Join(a.OutputDir, "checkpoint-16", TrainerStateName))
		if err != nil {
			t.Fatal(err)
		}
		null := strings.Contains(string(b), `"best_metric": null`) && strings.Contains(string(b), `"best_global_step": null`)
		if null != (metric == "") {
			t.Errorf("metric_for_best_model %q: best_metric null is %v:\n%.600s", metric, null, b)
		}
	}
}

// TestCurveSizeAndTicks: the training curve is 1200 pixels wide (it was 576 × 576) and its step axis reads
// 250, not 250.00.
func TestCurveSizeAndTicks(t *testing.T) {
	path := filepath.Join(t.TempDir(), CurveName)
	h := []LogEntry{{"step": 250, "loss": 0.7}, {"step": 500, "loss": 0.5, "eval_loss": 0.6, "eval_accuracy": 0.8}, {"step": 1000, "loss": 0.3}}
	if err := PlotCurves(path, h, "loss"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	img, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil || img.Width != 1200 || img.Height != 1050 {
		t.Errorf("%s: %dx%d (%v), want 1200x1050", CurveName, img.Width, img.Height, err)
	}
	for _, tk := range (stepTicks{}).Ticks(0, 1000) {
		if strings.Contains(tk.Label, ".") {
			t.Errorf("step tick %q", tk.Label)
		}
	}
}

// TestOutputDirErrorSpeaksTrainingArguments: a Go caller is told TrainingArguments' names (overwrite_output_dir,
// resume_from_checkpoint, output_dir), not recipe keys ("set training.overwrite_output_dir=true").
func TestOutputDirErrorSpeaksTrainingArguments(t *testing.T) {
	a := testArgs(t)
	os.WriteFile(filepath.Join(a.OutputDir, TrainerStateName), []byte("{}"), 0o644)
	err := a.CheckOutputDir()
	if err == nil || !strings.Contains(err.Error(), "set overwrite_output_dir to replace") || strings.Contains(err.Error(), "training.overwrite_output_dir") {
		t.Errorf("err = %v", err)
	}
}
