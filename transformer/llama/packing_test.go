package llama

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/transformertest"
)

// TestPackingEqualsSeparateRows: two examples packed into one row (SegmentIDs, positions restarting at each
// segment) give the logits, loss and gradients of the same examples as two padded rows, and labels (B, T)
// with -100 give the same loss as the examples alone.
func TestPackingEqualsSeparateRows(t *testing.T) {
	b := cpuBackend()
	cfg := tinyConfig(t, "llama")
	a := []int32{3, 9, 14, 2, 30}
	c := []int32{7, 1, 22}
	lab := func(ids []int32) []int64 {
		out := make([]int64, len(ids))
		for i, x := range ids {
			out[i] = int64(x)
		}
		out[0] = -100 // no prediction targets a segment's first token
		return out
	}
	packed := &loaders.Batch{B: 1, T: 8, InputIDs: append(append([]int32{}, a...), c...),
		SegmentIDs: []int32{0, 0, 0, 0, 0, 1, 1, 1}, Labels: append(lab(a), lab(c)...)}
	rows := &loaders.Batch{B: 2, T: 5, InputIDs: append(append([]int32{}, a...), append(c, 0, 0)...),
		AttentionMask: []int32{1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
		Labels:        append(lab(a), append(lab(c), -100, -100)...)}
	run := func(batch *loaders.Batch) (transformer.Output, map[string][]float32) {
		m := newModel(t, b, cfg, 9)
		out := transformertest.Step(t, m, batch, 0)
		o2, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		out.Logits = o2.Logits
		grads := map[string][]float32{}
		for _, np := range m.NamedParameters() {
			g := make([]float32, np.Grad.Numel())
			b.Download(g, np.Grad)
			grads[np.Name] = g
		}
		return out, grads
	}
	if n := (&ForCausalLM{}).Supervised(packed); n != 6 {
		t.Errorf("Supervised(packed) = %d, want 6", n)
	}
	po, pg := run(packed)
	ro, rg := run(rows)
	if math.Abs(float64(po.Loss-ro.Loss)) > 1e-6*math.Abs(float64(ro.Loss)) {
		t.Errorf("loss packed %v, rows %v", po.Loss, ro.Loss)
	}
	v := cfg.VocabSize
	for i := range 8 {
		r, j := 0, i
		if i >= 5 {
			r, j = 1, i-5
		}
		for k := range v {
			p, q := po.Logits[i*v+k], ro.Logits[(r*5+j)*v+k]
			if math.Abs(float64(p-q)) > 1e-5*(1+math.Abs(float64(q))) {
				t.Fatalf("token %d logit %d: packed %v, rows %v", i, k, p, q)
			}
		}
	}
	for name, g := range pg {
		for i := range g {
			if d := math.Abs(float64(g[i] - rg[name][i])); d > 1e-5*(1+math.Abs(float64(rg[name][i]))) {
				t.Fatalf("%s[%d]: packed %v, rows %v", name, i, g[i], rg[name][i])
			}
		}
	}
}
