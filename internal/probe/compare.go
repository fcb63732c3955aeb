package probe

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// Threshold is the max |FP32 − AMP| above which Compare flags a module: 1e-2, the usual rule of thumb that a
// checkpoint's autocast outputs within it of FP32 are safe to train and serve in mixed precision.
const Threshold = 1e-2

// LogitsRow names the logits' row in a CompareReport (the model's Output.Logits, FP32 on the host).
const LogitsRow = "logits"

// Diff is one module's difference under one policy, over every element of every batch.
type Diff struct {
	DType tensor.DType // the dtype the module's output had under the policy
	Max   float64      // max |FP32 − AMP|
	Mean  float64      // mean |FP32 − AMP|
	// MaxRef is max |FP32| over the same elements, for scale.
	MaxRef    float64
	NonFinite int // elements non-finite under the policy but finite in FP32
	// RefNonFinite counts the elements non-finite in FP32 itself, which no difference is measured on: the
	// model (or the data) is broken there, whatever the precision.
	RefNonFinite int
	n            int
	sum          float64
}

// Flagged reports whether the difference is above Threshold (or non-finite, under AMP or in FP32).
func (d Diff) Flagged() bool { return d.Max > Threshold || d.NonFinite > 0 || d.RefNonFinite > 0 }

// CompareRow is one module's differences, one Diff per policy (CompareReport.Policies order).
type CompareRow struct {
	Module string // the module path, or LogitsRow
	Diffs  []Diff // one per policy
}

// CompareReport is Compare's result.
type CompareReport struct {
	Policies []amp.Policy // the autocast policies compared with FP32
	Rows     []CompareRow // module outputs in forward order, then LogitsRow
	Batches  int          // batches run
	Examples int          // examples over all batches
}

// FirstRefNonFinite returns the first row (forward order) whose FP32 output holds non-finite values, or nil: from
// there on the comparison measures nothing, and tune debug nan finds the cause.
func (r *CompareReport) FirstRefNonFinite() *CompareRow {
	for i := range r.Rows {
		for _, d := range r.Rows[i].Diffs {
			if d.RefNonFinite > 0 {
				return &r.Rows[i]
			}
		}
	}
	return nil
}

// Row returns the row of module, or nil.
func (r *CompareReport) Row(module string) *CompareRow {
	for i := range r.Rows {
		if r.Rows[i].Module == module {
			return &r.Rows[i]
		}
	}
	return nil
}

// Compare runs every batch (inference: no dropout) in FP32 and then under each policy, and measures each
// observed module output and the logits against FP32. The model's policy is FP32 afterwards.
func Compare(m transformer.Model, batches []*loaders.Batch, policies []amp.Policy) (*CompareReport, error) {
	rep := &CompareReport{Policies: policies, Batches: len(batches)}
	index := map[string]int{}
	row := func(module string) *CompareRow {
		i, ok := index[module]
		if !ok {
			i = len(rep.Rows)
			index[module] = i
			rep.Rows = append(rep.Rows, CompareRow{Module: module, Diffs: make([]Diff, len(policies))})
		}
		return &rep.Rows[i]
	}
	rec := &recorder{b: m.Backend(), keep: true}
	run := func(p amp.Policy, bt *loaders.Batch) (map[string][]float32, map[string]tensor.DType, error) {
		m.SetPolicy(p)
		rec.reset()
		out, err := m.Forward(bt, transformer.ForwardOptions{HostLogits: true, Observe: rec.observer()})
		if err != nil {
			return nil, nil, err
		}
		vals, dts := rec.values, rec.dtypes
		vals[LogitsRow], dts[LogitsRow] = out.Logits, p.GemmDType() // the head is a GEMM-class op
		return vals, dts, nil
	}
	defer m.SetPolicy(amp.FP32)
	for bi, bt := range batches {
		ref, _, err := run(amp.FP32, bt)
		if err != nil {
			return nil, fmt.Errorf("probe: FP32 forward of batch %d: %w", bi+1, err)
		}
		rep.Examples += bt.B
		order := append(moduleOrder(rec.stats), LogitsRow)
		for pi, p := range policies {
			got, dts, err := run(p, bt)
			if err != nil {
				return nil, fmt.Errorf("probe: %s forward of batch %d: %w", p.Precision(), bi+1, err)
			}
			for _, mod := range order {
				d := &row(mod).Diffs[pi]
				d.DType = dts[mod]
				d.add(ref[mod], got[mod])
			}
		}
	}
	for i := range rep.Rows {
		for j := range rep.Rows[i].Diffs {
			d := &rep.Rows[i].Diffs[j]
			if d.n > 0 {
				d.Mean = d.sum / float64(d.n)
			}
		}
	}
	return rep, nil
}

// headModules are the output heads whose output is the logits row itself.
var headModules = map[string]bool{"classifier": true, "lm_head": true, "score": true}

// moduleOrder lists the modules of a pass's output stats in order, once each; the head, whose output is the
// logits, is left to LogitsRow.
func moduleOrder(stats []Stat) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range stats {
		if s.Kind == KindOutput && !seen[s.Module] && !headModules[s.Module] {
			seen[s.Module] = true
			out = append(out, s.Module)
		}
	}
	return out
}

// add accumulates |ref − got| element by element; a value finite in FP32 but not under AMP is counted apart.
func (d *Diff) add(ref, got []float32) {
	for i := range min(len(ref), len(got)) {
		r, g := float64(ref[i]), float64(got[i])
		if math.IsNaN(r) || math.IsInf(r, 0) {
			d.RefNonFinite++
			continue
		}
		d.MaxRef = math.Max(d.MaxRef, math.Abs(r))
		if math.IsNaN(g) || math.IsInf(g, 0) {
			d.NonFinite++
			continue
		}
		e := math.Abs(r - g)
		d.Max = math.Max(d.Max, e)
		d.sum += e
		d.n++
	}
}

// Write prints the table (one row per module, the logits last; a "!" after a value above Threshold) and the
// dtype each op class runs in under each policy.
func (r *CompareReport) Write(w io.Writer) error {
	ew := &errWriter{w: w}
	ew.printf("FP32 vs autocast over %d examples in %d batches (max and mean |fp32 - amp|; ! above %g)\n\n", r.Examples, r.Batches, Threshold)
	ew.printf("%-28s", "module")
	for _, p := range r.Policies {
		ew.printf("  %-5s %-10s %-10s", p.Precision(), "max|Δ|", "mean|Δ|")
	}
	ew.printf("  %s\n", "max|fp32|")
	flagged := 0
	for _, row := range r.Rows {
		ew.printf("%-28s", row.Module)
		ref := 0.0
		for _, d := range row.Diffs {
			mark := " "
			if d.Flagged() {
				mark = "!"
				flagged++
			}
			max := fmt.Sprintf("%.3e%s", d.Max, mark)
			if d.NonFinite > 0 {
				max = fmt.Sprintf("%d non-fin!", d.NonFinite)
			}
			if d.RefNonFinite > 0 {
				max = "fp32 n-f!"
			}
			ew.printf("  %-5s %-10s %-10.3e", d.DType, max, d.Mean)
			ref = d.MaxRef
		}
		ew.printf("  %.4g\n", ref)
	}
	ew.printf("\n")
	for _, p := range r.Policies {
		ew.printf("ops under %s autocast: %s\n", p.Precision(), OpDTypes(p))
	}
	if bad := r.FirstRefNonFinite(); bad != nil {
		ew.printf("\nthe FP32 output of %s is itself non-finite (%d values): nothing is compared from there on; "+
			"find the cause with tune debug nan\n", bad.Module, bad.Diffs[0].RefNonFinite)
	} else if flagged > 0 {
		ew.printf("\n%d values above %g: the autocast output drifts from FP32 there; train or serve that module in FP32, or prefer the other dtype\n", flagged, Threshold)
	} else {
		ew.printf("\nevery difference is below %g: autocast is safe for this model on these inputs\n", Threshold)
	}
	return ew.err
}

// opSpec is one op of a Transformer layer with the dtypes of its inputs: "f32" (a master weight, an
// embedding, a LayerNorm output, an FP32 residual) or "h" (the output of a GEMM-class op).
type opSpec struct {
	op, what string
	inputs   []string
}

// layerOps are the ops a BERT-style layer runs, in order, with where their inputs come from.
var layerOps = []opSpec{
	{"Embedding", "embedding lookup", []string{"f32"}},
	{"Gemm", "Linear / attention products", []string{"f32", "f32"}},
	{"Softmax", "attention softmax", []string{"h"}},
	{"GELU", "GELU", []string{"h"}},
	{"Dropout", "dropout", []string{"h"}},
	{"Add", "residual add", []string{"h", "f32"}},
	{"LayerNorm", "LayerNorm", []string{"f32"}},
	{"Tanh", "pooler tanh", []string{"h"}},
	{"CrossEntropy", "loss", []string{"h"}},
}

// OpDTypes says, from amp's op classes (amp.ClassOf, Policy.OutputDType), which dtype each op of a layer
// returns under p: "Linear / attention products f16 (FP32 accumulate), attention softmax f32, ...".
func OpDTypes(p amp.Policy) string {
	var parts []string
	for _, o := range layerOps {
		c, _ := amp.ClassOf(o.op)
		in := make([]tensor.DType, len(o.inputs))
		for i, s := range o.inputs {
			in[i] = tensor.F32
			if s == "h" {
				in[i] = p.GemmDType()
			}
		}
		dt := p.OutputDType(c, in...)
		if o.op == "Softmax" {
			dt = p.AttentionScoresDType()
		}
		note := ""
		if c == amp.LowerPrecision {
			note = " (FP32 accumulate)"
		}
		parts = append(parts, fmt.Sprintf("%s %s%s", o.what, dt, note))
	}
	return strings.Join(parts, ", ")
}
