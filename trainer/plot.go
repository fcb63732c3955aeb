package trainer

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// CurveName is the training-curve plot written to output_dir at the end of Train.
const CurveName = "training_curve.png"

// curvePlotter writes CurveName from log_history when training ends.
type curvePlotter struct{ CallbackBase }

func (curvePlotter) OnTrainEnd(e *Event) error {
	return PlotCurves(filepath.Join(e.Args.OutputDir, CurveName), e.State.LogHistory, e.Args.BestMetric())
}

// PlotCurves draws a training curve as a PNG at path (written atomically): the top panel shows the training
// loss and the eval loss against the optimizer step, the bottom panel the eval metric `metric` (without its
// "eval_" prefix; "accuracy" when metric is the loss and accuracy was measured). Values that cannot be plotted
// are left out: non-finite ones, and finite ones beyond ±maxPlotted (a log_history of ±1e308, from an edited
// checkpoint, made the axis range overflow to +Inf and gonum's tick search spin forever). With no evaluation
// the bottom panel is omitted.
func PlotCurves(path string, history []LogEntry, metric string) error {
	series := func(key string) plotter.XYs {
		var xy plotter.XYs
		for _, l := range history {
			v, ok := l[key]
			if ok && plottable(v) && plottable(l["step"]) {
				xy = append(xy, plotter.XY{X: l["step"], Y: v})
			}
		}
		return xy
	}
	if metric == "loss" && len(series("eval_accuracy")) > 0 {
		metric = "accuracy"
	}
	top := plot.New()
	top.Title.Text = "loss"
	top.X.Label.Text = "step"
	if err := addLine(top, series("loss"), "train", color.RGBA{R: 31, G: 119, B: 180, A: 255}); err != nil {
		return err
	}
	if err := addLine(top, series("eval_loss"), "eval", color.RGBA{R: 255, G: 127, B: 14, A: 255}); err != nil {
		return err
	}
	panels := [][]*plot.Plot{{top}}
	if metric != "loss" {
		if m := series("eval_" + metric); len(m) > 0 {
			bottom := plot.New()
			bottom.Title.Text = "eval " + metric
			bottom.X.Label.Text = "step"
			if err := addLine(bottom, m, "eval", color.RGBA{R: 44, G: 160, B: 44, A: 255}); err != nil {
				return err
			}
			bottom.Legend.Top = false // keep the legend off a rising metric curve
			switch metric {           // bounded metrics get their whole range, so one eval point does not float mid-air
			case "accuracy", "f1":
				bottom.Y.Min, bottom.Y.Max = 0, 1
			case "matthews_correlation":
				bottom.Y.Min, bottom.Y.Max = -1, 1
			}
			panels = append(panels, []*plot.Plot{bottom})
		}
	}
	maxStep := 1.0
	for _, l := range history {
		if plottable(l["step"]) {
			maxStep = max(maxStep, l["step"])
		}
	}
	for _, row := range panels { // one step axis for both panels, labelled with whole steps (250, not 250.00)
		row[0].X.Min, row[0].X.Max = 0, maxStep
		row[0].X.Tick.Marker = stepTicks{}
	}
	// 8 × 3.5 inches a panel at 150 dpi: 1200 × 525 pixels each, readable on a screen.
	const w, rowH, dpi = 8 * vg.Inch, 3.5 * vg.Inch, 150
	img := vgimg.NewWith(vgimg.UseWH(w, rowH*vg.Length(len(panels))), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	canvases := plot.Align(panels, tiles, dc)
	for i := range panels {
		panels[i][0].Draw(canvases[i][0])
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return fmt.Errorf("trainer: plot %s: %w", path, err)
	}
	return writeFileAtomic(path, buf.Bytes())
}

// maxPlotted bounds the values PlotCurves draws: far beyond any loss, metric or step, and far enough below
// math.MaxFloat64 that an axis range (max − min) stays finite.
const maxPlotted = 1e100

// plottable reports whether v can be drawn: finite and within ±maxPlotted.
func plottable(v float64) bool { return !math.IsNaN(v) && math.Abs(v) <= maxPlotted }

// stepTicks places gonum's default ticks and labels them as plain numbers (250, 1e+04 stays 10000, 0.5 for a
// fractional tick), instead of DefaultTicks' fixed precision ("250.00").
type stepTicks struct{}

// Ticks returns plot.DefaultTicks' ticks between min and max with shortest-form labels.
func (stepTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}

// addLine adds xy to p as a line with points (a single point shows as a dot) and a legend entry.
func addLine(p *plot.Plot, xy plotter.XYs, name string, c color.Color) error {
	if len(xy) == 0 {
		return nil
	}
	l, s, err := plotter.NewLinePoints(xy)
	if err != nil {
		return fmt.Errorf("trainer: plot: %w", err)
	}
	l.Color, s.Color = c, c
	s.Radius = vg.Points(1.5)
	p.Add(l, s)
	p.Legend.Add(name, l)
	p.Legend.Top = true
	return nil
}
