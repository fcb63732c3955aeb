package trainer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/tune-ml/tune/internal/atomicfile"
)

// MetricsName is the file in output_dir to which every log entry is appended as one JSON line.
const MetricsName = "metrics.jsonl"

// jsonlWriter appends every log entry to output_dir/metrics.jsonl, opening the file for each entry so that
// nothing stays open when training stops early. A resumed run first drops the entries logged after the
// checkpoint it resumes from (the steps it is about to run again), so each step appears once, as in the
// checkpoint's log_history.
type jsonlWriter struct {
	CallbackBase
	path string
}

func newJSONLWriter(outputDir string) *jsonlWriter {
	return &jsonlWriter{path: filepath.Join(outputDir, MetricsName)}
}

// maxLogLine is the longest metrics.jsonl line OnTrainBegin parses: a run writes lines of a few hundred bytes.
const maxLogLine = 64 << 10

// OnTrainBegin, in a run resumed at step N, keeps only the file's entries up to step N. It reads the file a line
// at a time, twice (whether any entry is to go, then the copy without them, written atomically), so memory does
// not follow the file's size (it read the file whole and built the copy in memory: a 32 MiB log grew the heap by
// 200 MiB). A line longer than maxLogLine, which no run writes, is kept as it is.
func (j *jsonlWriter) OnTrainBegin(e *Event) error {
	if e.State.GlobalStep == 0 {
		return nil
	}
	step := float64(e.State.GlobalStep)
	dropped, err := filterLog(j.path, step, io.Discard)
	if os.IsNotExist(err) || (err == nil && dropped == 0) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := atomicfile.Write(j.path, 0o644, func(w io.Writer) error {
		_, err := filterLog(j.path, step, w)
		return err
	}); err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	return nil
}

// filterLog copies the lines of the metrics.jsonl at path to w, leaving out blank lines and the entries logged
// after step; it returns how many lines it left out.
func filterLog(path string, step float64, w io.Writer) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, maxLogLine)
	dropped := 0
	for {
		line, err := r.ReadSlice('\n')
		long := errors.Is(err, bufio.ErrBufferFull)
		for errors.Is(err, bufio.ErrBufferFull) { // a line no run writes: kept, copied in pieces
			if _, werr := w.Write(line); werr != nil {
				return 0, werr
			}
			line, err = r.ReadSlice('\n')
		}
		if err != nil && err != io.EOF {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		var entry struct {
			Step *float64 `json:"step"`
		}
		switch {
		case long:
		case len(bytes.TrimSpace(line)) == 0:
			dropped += min(len(line), 1)
			line = nil
		case json.Unmarshal(line, &entry) == nil && entry.Step != nil && *entry.Step > step:
			dropped++
			line = nil
		}
		if _, werr := w.Write(line); werr != nil {
			return 0, werr
		}
		if err == io.EOF {
			return dropped, nil
		}
	}
}

// OnLog appends the entry as one line.
func (j *jsonlWriter) OnLog(_ *Event, logs LogEntry) (err error) {
	line, err := json.Marshal(logs)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(j.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = f.Write(append(line, '\n'))
	return err
}

// terminalColumns returns w's width in columns when it is a terminal, else 0.
func terminalColumns(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil {
			return cols
		}
	}
	return 0
}

// compactBelow is the terminal width under which the bar leaves out the elapsed and remaining times and the
// tokens/s (the log lines above it carry them), so that its line fits: an overlong line wraps, and the
// terminal then shows a new line at every redraw.
const compactBelow = 110

// barWidth sizes the bar so that its whole line fits in cols columns: "100% |", the bar, "| ", the count
// (steps of up to 5 digits), the times unless compact, and a description of descLen characters. 24 when the
// width is unknown; between 8 and 40.
func barWidth(cols, descLen int, compact bool) int {
	if cols <= 0 {
		return 24
	}
	used := 6 + 2 + len("(12345/12345)") + 1 + descLen + 1
	if !compact {
		used += len(" [12m34s:1h2m3s]")
	}
	return min(max(cols-used, 8), 40)
}

// describe is the bar's description: fixed-width fields, so that the line keeps its length as the numbers
// change; without tokens/s when compact.
func (p *progress) describe(compact bool) string {
	r := &p.t.run
	desc := fmt.Sprintf("loss %7.4f  lr %.2e", r.lastLoss, r.lr)
	if !compact {
		desc += fmt.Sprintf("  %6s tok/s", humanize(p.tokPerSec))
	}
	if p.t.scaler.Enabled() { // bf16 has no loss scale
		desc += fmt.Sprintf("  scale %-6g", r.scale)
	}
	if r.skippedTotal > 0 {
		desc += fmt.Sprintf("  skipped %d", r.skippedTotal)
	}
	return desc
}

// isTerminal reports whether w is a terminal (a variable, so that tests can draw the terminal display).
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress shows training on out: a progress bar (step/total, loss, learning rate, loss scale, tokens/s,
// elapsed and ETA) when out is a terminal, with each log entry printed as a line above it (so the loss history
// stays on screen, as transformers' notebook and console callbacks keep it) and a second bar while an
// evaluation runs; else one plain line per log entry, which suits log files and CI.
type progress struct {
	CallbackBase
	out       io.Writer
	t         *Trainer
	tty       bool
	bar       *progressbar.ProgressBar
	evalBar   *progressbar.ProgressBar
	cols      int  // the terminal's width (0: unknown)
	compact   bool // a narrow terminal: no times or tokens/s on the bar
	start     time.Time
	lastTime  time.Time
	lastTok   int64
	tokPerSec float64
}

func newProgress(out io.Writer, t *Trainer) *progress {
	p := &progress{out: out, t: t, tty: isTerminal(out)}
	t.predictStep = p.predictStep
	return p
}

// predictStep shows an evaluation's progress under the training bar: examples done of total, as transformers'
// on_prediction_step drives its prediction bar. Only on a terminal, and only during training.
func (p *progress) predictStep(prefix string, done, total int) {
	if p.bar == nil {
		return
	}
	if p.evalBar == nil {
		p.bar.Clear()
		p.evalBar = progressbar.NewOptions(total, progressbar.OptionSetWriter(p.out), progressbar.OptionShowCount(),
			progressbar.OptionSetDescription(prefix), progressbar.OptionSetWidth(barWidth(p.cols, len(prefix), p.compact)),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetElapsedTime(!p.compact),
			progressbar.OptionSetPredictTime(!p.compact), progressbar.OptionSetRenderBlankState(true))
	}
	p.evalBar.Set(done)
	if done >= total {
		p.evalBar.Clear()
		p.evalBar = nil
		p.bar.RenderBlank()
	}
}

func (p *progress) OnTrainBegin(e *Event) error {
	p.start, p.lastTime, p.lastTok = time.Now(), time.Now(), e.State.NumInputTokensSeen
	if p.tty {
		p.cols = terminalColumns(p.out)
		p.compact = p.cols > 0 && p.cols < compactBelow
		p.bar = progressbar.NewOptions(e.State.MaxSteps, progressbar.OptionSetWriter(p.out),
			progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(!p.compact), progressbar.OptionSetElapsedTime(!p.compact),
			progressbar.OptionSetWidth(barWidth(p.cols, len(p.describe(p.compact)), p.compact)), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionShowDescriptionAtLineEnd(), progressbar.OptionSetRenderBlankState(true))
		p.bar.Set(e.State.GlobalStep)
	}
	return nil
}

// OnStepEnd updates the tokens/s estimate (smoothed over recent steps) and the bar.
func (p *progress) OnStepEnd(e *Event) error {
	now := time.Now()
	if dt := now.Sub(p.lastTime).Seconds(); dt > 0 {
		rate := float64(e.State.NumInputTokensSeen-p.lastTok) / dt
		if p.tokPerSec == 0 {
			p.tokPerSec = rate
		} else {
			p.tokPerSec = 0.8*p.tokPerSec + 0.2*rate
		}
	}
	p.lastTime, p.lastTok = now, e.State.NumInputTokensSeen
	if p.bar != nil {
		p.bar.Describe(p.describe(p.compact))
		p.bar.Set(e.State.GlobalStep)
	}
	return nil
}

// OnLog prints every entry as a line, above the bar on a terminal.
func (p *progress) OnLog(e *Event, logs LogEntry) error {
	_, isTrain := logs["loss"]
	line := p.format(e, logs, isTrain)
	if p.bar != nil {
		p.bar.Clear()
		fmt.Fprintln(p.out, line)
		p.bar.RenderBlank()
		return nil
	}
	_, err := fmt.Fprintln(p.out, line)
	return err
}

// format renders a log entry: "step 12/100  epoch 0.24  loss 0.6931  lr 5e-05  grad_norm 0.512  scale 65536
// 1.2k tok/s  eta 1m3s" for a training entry; the other entries list their keys.
func (p *progress) format(e *Event, logs LogEntry, isTrain bool) string {
	s := e.State
	var b strings.Builder
	fmt.Fprintf(&b, "step %d/%d  epoch %.2f", s.GlobalStep, s.MaxSteps, s.Epoch)
	if isTrain {
		fmt.Fprintf(&b, "  loss %.4f  lr %.4g  grad_norm %.4g", logs["loss"], logs["learning_rate"], logs["grad_norm"])
		if v, ok := logs["loss_scale"]; ok {
			fmt.Fprintf(&b, "  scale %g", v)
		}
		if v := logs["skipped_steps"]; v > 0 {
			fmt.Fprintf(&b, "  skipped %g", v)
		}
		if v, ok := logs["mean_token_accuracy"]; ok {
			fmt.Fprintf(&b, "  mean_token_accuracy %.4f", v)
		}
		fmt.Fprintf(&b, "  %s tok/s  eta %s", humanize(p.tokPerSec), p.eta(s))
		return b.String()
	}
	for _, k := range keys(logs) {
		if k == "epoch" || k == "step" || k == "total_flos" {
			continue
		}
		fmt.Fprintf(&b, "  %s %.4g", k, logs[k])
	}
	return b.String()
}

// eta estimates the remaining time from the steps done since this Train call began.
func (p *progress) eta(s *TrainerState) string {
	done := s.GlobalStep - p.t.run.startStep
	if done <= 0 {
		return "?"
	}
	return formatETA(float64(time.Since(p.start)) / float64(done) * float64(s.MaxSteps-s.GlobalStep))
}

// formatETA writes a remaining time of ns nanoseconds (a float: max_steps 10^15 overflowed time.Duration into
// "eta -2562047h47m16.85s"); beyond 100000 hours it is "> 100000h".
func formatETA(ns float64) string {
	const most = 100_000 * float64(time.Hour)
	if !(ns < most) { // NaN too
		return "> 100000h"
	}
	return time.Duration(max(ns, 0)).Round(time.Second).String()
}

func (p *progress) OnTrainEnd(*Event) error {
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.out)
		p.bar = nil
	}
	return nil
}

// abort ends the bar's line when training stops with an error, so the error starts on a line of its own.
func (p *progress) abort() {
	if p.bar != nil {
		fmt.Fprintln(p.out)
		p.bar = nil
	}
}

// humanize formats a rate as 950, 12.3k or 4.56M.
func humanize(x float64) string {
	switch {
	case math.IsNaN(x) || x < 1e3:
		return fmt.Sprintf("%.0f", x)
	case x < 1e6:
		return fmt.Sprintf("%.1fk", x/1e3)
	}
	return fmt.Sprintf("%.2fM", x/1e6)
}
