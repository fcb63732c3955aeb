package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// palette colours the implementations: tune first, then PyTorch eager, compiled, and the rest.
var palette = []color.Color{
	color.RGBA{R: 31, G: 119, B: 180, A: 255},
	color.RGBA{R: 255, G: 127, B: 14, A: 255},
	color.RGBA{R: 44, G: 160, B: 44, A: 255},
	color.RGBA{R: 148, G: 103, B: 189, A: 255},
	color.RGBA{R: 140, G: 86, B: 75, A: 255},
}

// implLabel names r's implementation in a legend: Impl, with a non-default attention in parentheses.
func implLabel(r *Result) string {
	if r.Attention != "" && r.Attention != "sdpa" {
		return r.Impl + " (" + r.Attention + ")"
	}
	return r.Impl
}

// implRank orders the legend: tune, PyTorch eager, PyTorch compiled, then the rest.
func implRank(label string) int {
	for i, p := range []string{ImplTune, ImplPyTorchEager, ImplPyTorchCompile} {
		if label == p {
			return i
		}
	}
	return 3
}

// Chart renders rs as a PNG: one group of bars per configuration (Compare's order), one bar per
// implementation, in two panels: throughput in tokens/s (higher is better) and peak memory in GiB (lower is
// better). A configuration an implementation did not run shows no bar. It errors when rs is empty.
func Chart(rs []Result) ([]byte, error) {
	rows := Compare(rs)
	if len(rows) == 0 {
		return nil, fmt.Errorf("bench: chart: no results")
	}
	var impls []string
	seen := map[string]bool{}
	addImpl := func(r *Result) {
		if l := implLabel(r); !seen[l] {
			seen[l] = true
			impls = append(impls, l)
		}
	}
	models, devices := map[string]bool{}, map[string]bool{}
	for _, row := range rows {
		for _, r := range append([]*Result{row.Tune}, row.Others...) {
			if r != nil {
				addImpl(r)
				models[r.Model], devices[r.Device] = true, true
			}
		}
	}
	slices.SortStableFunc(impls, func(a, b string) int { return implRank(a) - implRank(b) })
	names := make([]string, len(rows))
	for i, row := range rows {
		names[i] = row.Key
		if len(models) == 1 { // the title names the model; keep the tick labels short
			names[i] = strings.TrimSpace(row.Key[strings.Index(row.Key, " ")+1:])
		}
		names[i] = strings.Replace(names[i], " LoRA", "\nLoRA", 1)
	}
	title := "one training step incl. AdamW"
	if len(impls) > 1 {
		title = strings.Join(impls, " vs ") + ", " + title
	} else {
		title = impls[0] + ", " + title
	}
	if len(models) == 1 {
		for m := range models {
			title = m + ": " + title
		}
	}
	if len(devices) == 1 {
		for d := range devices {
			if d != "" {
				title += "\n" + d
			}
		}
	}
	panel := func(ylabel string, value func(*Result) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Y.Label.Text = ylabel
		p.Add(plotter.NewGrid())
		top := 0.0
		width := vg.Points(min(60/float64(len(impls)), 18))
		for j, impl := range impls {
			vals := make(plotter.Values, len(rows))
			for i, row := range rows {
				for _, r := range append([]*Result{row.Tune}, row.Others...) {
					if r != nil && implLabel(r) == impl {
						vals[i] = value(r)
						top = max(top, vals[i])
					}
				}
			}
			bars, err := plotter.NewBarChart(vals, width)
			if err != nil {
				return nil, fmt.Errorf("bench: chart: %w", err)
			}
			bars.Color = palette[j%len(palette)]
			bars.LineStyle.Width = 0
			bars.Offset = width * vg.Length(float64(j)-float64(len(impls)-1)/2)
			p.Add(bars)
			p.Legend.Add(impl, bars)
		}
		p.Legend.Top = true
		p.Y.Min, p.Y.Max = 0, 1.3*top // headroom for the legend
		p.NominalX(names...)
		return p, nil
	}
	speed, err := panel("thousand tokens/s (higher is better)", func(r *Result) float64 { return r.TokensPerS / 1e3 })
	if err != nil {
		return nil, err
	}
	speed.Title.Text = title
	memory, err := panel("peak GiB (lower is better)", func(r *Result) float64 { return float64(r.PeakBytes) / gib })
	if err != nil {
		return nil, err
	}
	panels := [][]*plot.Plot{{speed}, {memory}}
	w := vg.Length(max(6, 0.9*float64(len(rows)))) * vg.Inch
	img := vgimg.New(w, 7*vg.Inch)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: 4 * vg.Millimeter, PadTop: 2 * vg.Millimeter,
		PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	canvases := plot.Align(panels, tiles, draw.New(img))
	for i := range panels {
		panels[i][0].Draw(canvases[i][0])
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("bench: chart: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteChart renders Chart(rs) into a new file at path (refusing to replace an existing one).
func WriteChart(path string, rs []Result) error {
	png, err := Chart(rs)
	if err != nil {
		return err
	}
	return writeNew(path, png)
}
