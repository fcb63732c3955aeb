package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// gib is 2^30 bytes.
const gib = 1 << 30

// WriteTable writes one line per result (the table `tune bench` prints): mode, median ms/step with the 10th–90th
// percentile range, tokens/s, TFLOP/s, peak memory in GiB, skipped FP16 steps, host waits per step and the loss
// of the first and last timed step.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tfine-tuning\tms/step\tp10–p90\ttokens/s\tTFLOP/s\tpeak GiB\tskipped\twaits/step\tloss first→last\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f–%.2f\t%s\t%s\t%.2f\t%d\t%.1f\t%.4f→%.4f\t\n", r.Mode, tuning(&r), r.MedianMS,
			r.P10MS, r.P90MS, thousands(r.TokensPerS), rate(r.TFLOPS), float64(r.PeakBytes)/gib, r.SkippedSteps,
			r.HostWaitsPerStep, r.LossFirst, r.LossLast)
	}
	return tw.Flush()
}

// rate formats a TFLOP/s or GB/s figure: one decimal from 10 up, three significant digits below (a CPU's
// TFLOP/s are small).
func rate(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// tuning names the fine-tuning method of r: "full" or "LoRA r=8".
func tuning(r *Result) string {
	if r.LoRA {
		return fmt.Sprintf("LoRA r=%d", r.LoRARank)
	}
	return "full"
}

// thousands formats v rounded to an integer with thousands separators.
func thousands(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Sprint(v)
	}
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// WriteBreakdown writes r's per-op breakdown: per op class the calls and milliseconds per step, the share of
// the profiled total, achieved TFLOP/s (GEMMs) and GB/s (bytes as Meter estimates them), then the slowest GEMM
// shapes. It writes nothing when r has no breakdown.
func WriteBreakdown(w io.Writer, r *Result) error {
	bd := r.Breakdown
	if bd == nil || bd.Steps == 0 {
		return nil
	}
	total := 0.0
	for _, o := range bd.Ops {
		total += o.MS
	}
	per := float64(bd.Steps)
	fmt.Fprintf(w, "per-op time of %s (%d profiled steps, every op timed alone with %s: %.1f ms/step in ops, "+
		"%.1f ms for an unprofiled step; a 1-element op takes %.4f ms this way)\n",
		r.Key(), bd.Steps, bd.Timing, total/per, bd.StepMS, bd.LaunchMS)
	host := false // a gated timer measured host time apart
	for _, o := range bd.Ops {
		host = host || o.HostMS > 0
	}
	write := func(title string, ops []OpStat) error {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%s\tcalls/step\tms/step\tshare\tTFLOP/s\tGB/s\t", title)
		if host {
			fmt.Fprint(tw, "host ms/step\t")
		}
		fmt.Fprintln(tw)
		for _, o := range ops {
			tf, gb := "", ""
			if o.MS > 0 && o.FLOPs > 0 {
				tf = rate(o.FLOPs / (o.MS / 1e3) / 1e12)
			}
			if o.MS > 0 && o.Bytes > 0 {
				gb = rate(o.Bytes / (o.MS / 1e3) / 1e9)
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%.1f%%\t%s\t%s\t", o.Op, float64(o.Calls)/per, o.MS/per,
				100*o.MS/total, tf, gb)
			if host {
				fmt.Fprintf(tw, "%.3f\t", o.HostMS/per)
			}
			if o.Waits > 0 {
				fmt.Fprintf(tw, "(%d waited for the device)\t", o.Waits)
			}
			fmt.Fprintln(tw)
		}
		return tw.Flush()
	}
	if err := write("op", bd.Ops); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return write("GEMM shape (M×N×K, A/B transposed)", bd.Gemms)
}

// Row is one configuration of a comparison: tune's result and the other implementations' results for it.
type Row struct {
	Key    string    // the configuration (Result.Key)
	Tune   *Result   // tune's result; nil when only other implementations measured it
	Others []*Result // sorted by Impl
}

// Compare groups results by configuration (Result.Key), in the order the configurations first appear, with
// tune's result (the last one given, when several are) and the others sorted by implementation name.
func Compare(rs []Result) []Row {
	var rows []Row
	index := map[string]int{}
	for i := range rs {
		r := &rs[i]
		k := r.Key()
		j, ok := index[k]
		if !ok {
			j = len(rows)
			index[k] = j
			rows = append(rows, Row{Key: k})
		}
		if r.Impl == ImplTune {
			rows[j].Tune = r
		} else {
			rows[j].Others = append(rows[j].Others, r)
		}
	}
	for i := range rows {
		slices.SortStableFunc(rows[i].Others, func(a, b *Result) int { return strings.Compare(a.Impl, b.Impl) })
	}
	return rows
}

// ratio returns a/b, NaN when either is not positive.
func ratio(a, b float64) float64 {
	if !(a > 0) || !(b > 0) {
		return math.NaN()
	}
	return a / b
}

// fmtRatio formats a ratio with two decimals, "–" for NaN.
func fmtRatio(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

// WriteComparison writes every result grouped by configuration, and on each other implementation's line the
// ratios tune/other of the median step time (below 1: tune is faster) and of peak memory (below 1: tune uses
// less). With markdown the table is a GitHub-flavoured Markdown table.
func WriteComparison(w io.Writer, rs []Result, markdown bool) error {
	header := []string{"configuration", "implementation", "ms/step", "p10–p90", "tokens/s", "TFLOP/s", "peak GiB",
		"time tune/x", "memory tune/x"}
	var lines [][]string
	for _, row := range Compare(rs) {
		all := row.Others
		if row.Tune != nil {
			all = append([]*Result{row.Tune}, all...)
		}
		for i, r := range all {
			key := ""
			if i == 0 {
				key = row.Key
			}
			impl := r.Impl
			if r.Attention != "" && r.Attention != "sdpa" {
				impl += " (" + r.Attention + ")"
			}
			tr, mr := "", ""
			if r != row.Tune && row.Tune != nil {
				tr = fmtRatio(ratio(row.Tune.MedianMS, r.MedianMS))
				mr = fmtRatio(ratio(float64(row.Tune.PeakBytes), float64(r.PeakBytes)))
			}
			lines = append(lines, []string{key, impl, fmt.Sprintf("%.2f", r.MedianMS),
				fmt.Sprintf("%.2f–%.2f", r.P10MS, r.P90MS), thousands(r.TokensPerS), rate(r.TFLOPS),
				fmt.Sprintf("%.2f", float64(r.PeakBytes)/gib), tr, mr})
		}
	}
	if markdown {
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
		for _, l := range lines {
			fmt.Fprintf(w, "| %s |\n", strings.Join(l, " | "))
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, l := range lines {
		fmt.Fprintln(tw, strings.Join(l, "\t")+"\t")
	}
	return tw.Flush()
}

// Target is one of the performance goals of the benchmark (issue 9): tune's throughput, or its peak memory,
// against PyTorch eager on one configuration.
type Target struct {
	Name     string  // "64×512 BF16 full fine-tuning: throughput"
	Key      string  // the configuration (Result.Key)
	Memory   bool    // a memory goal (tune/PyTorch ≤ Want) rather than throughput (PyTorch/tune time ≥ Want)
	Want     float64 // the bound
	Got      float64 // the measured ratio; NaN when a result is missing
	Met      bool    // the bound holds: Got ≤ Want for memory, Got ≥ Want for throughput
	Measured bool    // both results were present
}

// Targets evaluates the first-pass goals on rs against PyTorch eager with sdpa attention:
// BERT-base 64×512 BF16 full fine-tuning with throughput ≥ 1.0× and peak memory ≤ 1.0×, and BERT-base 32×128
// BF16 LoRA r=8 with throughput ≥ 1.5×; and the decoder goals (issue 14), 8×2048 BF16 SmolLM2-135M full
// fine-tuning and Qwen2.5-0.5B LoRA r=16 (all-linear), each with throughput ≥ 1.3× and peak memory ≤ 0.5×.
// Throughput ratio = PyTorch's median step time / tune's.
func Targets(rs []Result) []Target {
	ts := []Target{
		{Name: "bert-base 64×512 BF16 full fine-tuning: throughput ≥ 1.0× PyTorch eager", Key: "bert-base 64×512 bf16", Want: 1},
		{Name: "bert-base 64×512 BF16 full fine-tuning: peak memory ≤ 1.0× PyTorch eager", Key: "bert-base 64×512 bf16", Memory: true, Want: 1},
		{Name: "bert-base 32×128 BF16 LoRA r=8: throughput ≥ 1.5× PyTorch eager", Key: "bert-base 32×128 bf16 LoRA r=8", Want: 1.5},
	}
	for _, d := range []struct{ name, key string }{
		{"smollm2-135m 8×2048 BF16 full fine-tuning", "smollm2-135m 8×2048 bf16"},
		{"qwen2.5-0.5b 8×2048 BF16 LoRA r=16", "qwen2.5-0.5b 8×2048 bf16 LoRA r=16"},
	} {
		if !slices.ContainsFunc(rs, func(r Result) bool { return r.Key() == d.key }) {
			continue // only reported where a decoder was measured
		}
		ts = append(ts, Target{Name: d.name + ": throughput ≥ 1.3× PyTorch eager", Key: d.key, Want: 1.3},
			Target{Name: d.name + ": peak memory ≤ 0.5× PyTorch eager", Key: d.key, Memory: true, Want: 0.5})
	}
	for i := range ts {
		t := &ts[i]
		t.Got = math.NaN()
		for _, row := range Compare(rs) {
			if row.Key != t.Key || row.Tune == nil {
				continue
			}
			for _, o := range row.Others {
				if o.Impl != ImplPyTorchEager || (o.Attention != "" && o.Attention != "sdpa") {
					continue
				}
				if t.Memory {
					t.Got = ratio(float64(row.Tune.PeakBytes), float64(o.PeakBytes))
					t.Met = t.Got <= t.Want
				} else {
					t.Got = ratio(o.MedianMS, row.Tune.MedianMS)
					t.Met = t.Got >= t.Want
				}
				t.Measured = !math.IsNaN(t.Got)
			}
		}
	}
	return ts
}

// WriteTargets writes one line per Target: MET, MISSED or "not measured", with the ratio.
func WriteTargets(w io.Writer, ts []Target) error {
	for _, t := range ts {
		verdict := "not measured (run both tune and PyTorch eager on this configuration)"
		if t.Measured {
			verdict = "MISSED"
			if t.Met {
				verdict = "MET"
			}
			verdict += fmt.Sprintf(" (%.2f×)", t.Got)
		}
		if _, err := fmt.Fprintf(w, "%s: %s\n", t.Name, verdict); err != nil {
			return err
		}
	}
	return nil
}
