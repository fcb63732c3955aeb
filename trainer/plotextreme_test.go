package trainer

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPlotCurvesWithExtremeValues: a log_history of ±1e308 (an edited checkpoint) made the y range overflow to
// +Inf and gonum's tick search spin at 100% CPU after training, past SIGTERM (findings5 #30). Such values are
// left out like non-finite ones; the plot is written.
func TestPlotCurvesWithExtremeValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), CurveName)
	history := []LogEntry{{"loss": 1e308, "step": 10}, {"loss": -1e308, "step": 20}, {"loss": 0.5, "step": 30},
		{"eval_loss": 0.4, "eval_accuracy": 0.9, "step": 30}, {"loss": 0.4, "step": 1e300}}
	done := make(chan error, 1)
	go func() { done <- PlotCurves(path, history, "loss") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("PlotCurves still running after 60 s")
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Errorf("no plot: %v", err)
	}
}
