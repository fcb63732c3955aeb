package trainer

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor/cpu"
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

// TestBarFitsTheTerminal: at 80 columns the bar's line, with fp16's scale and a 5-digit step count, fits
// (it took about 100 columns, so it wrapped and scrolled at every redraw); wide terminals keep the times.
func TestBarFitsTheTerminal(t *testing.T) {
	tr := &Trainer{}
	var err error
	if tr.scaler, err = amp.NewGradScaler(cpu.New(), amp.DefaultGradScalerOptions()); err != nil {
		t.Fatal(err)
	}
	p := &progress{t: tr}
	desc := p.describe(true)
	w := barWidth(80, len(desc), true)
	if line := 6 + w + 2 + len("(12345/12345)") + 1 + len(desc); line > 80 || w < 8 || !strings.Contains(desc, "scale") {
		t.Errorf("at 80 columns: bar %d, line %d columns (%q)", w, line, desc)
	}
	if barWidth(0, 40, false) != 24 || barWidth(300, 40, false) != 40 {
		t.Errorf("barWidth: unknown %d, wide %d", barWidth(0, 40, false), barWidth(300, 40, false))
	}
}

// TestFormatETA: a huge max_steps overflowed time.Duration into a negative ETA (findings5 #1).
func TestFormatETA(t *testing.T) {
	for ns, want := range map[float64]string{
		float64(90 * time.Second): "1m30s", 1e30: "> 100000h", float64(100_001 * time.Hour): "> 100000h", -5: "0s",
	} {
		if got := formatETA(ns); got != want {
			t.Errorf("formatETA(%g) = %q, want %q", ns, got, want)
		}
	}
}
