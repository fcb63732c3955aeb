package probe

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
)

// TestCompareNonFiniteReference checks that a module whose FP32 output is itself NaN is reported, not skipped:
// tune debug compare on a checkpoint with a NaN weight used to print max|Δ| 0 for every row from that layer on
// and conclude "autocast is safe for this model".
func TestCompareNonFiniteReference(t *testing.T) {
	nan := float32(math.NaN())
	var good, bad Diff
	good.add([]float32{1, 2}, []float32{1, 2.001})
	bad.add([]float32{nan, nan, 1}, []float32{nan, nan, 1})
	if bad.RefNonFinite != 2 || !bad.Flagged() || good.Flagged() {
		t.Fatalf("RefNonFinite %d, flagged %v/%v; want 2, true/false", bad.RefNonFinite, bad.Flagged(), good.Flagged())
	}
	good.DType, bad.DType = tensor.F32, tensor.F32
	rep := &CompareReport{Policies: []amp.Policy{amp.FP16}, Batches: 1, Examples: 1, Rows: []CompareRow{
		{Module: "bert.encoder.layer.0", Diffs: []Diff{good}},
		{Module: "bert.encoder.layer.1", Diffs: []Diff{bad}},
		{Module: LogitsRow, Diffs: []Diff{bad}},
	}}
	if r := rep.FirstRefNonFinite(); r == nil || r.Module != "bert.encoder.layer.1" {
		t.Fatalf("FirstRefNonFinite = %v, want bert.encoder.layer.1", r)
	}
	var buf bytes.Buffer
	if err := rep.Write(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, "autocast is safe") || !strings.Contains(out, "the FP32 output of bert.encoder.layer.1 is itself non-finite (2 values)") ||
		!strings.Contains(out, "tune debug nan") {
		t.Errorf("report:\n%s", out)
	}
}
