package lora

import (
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
)

// TestAdaptersUnderSDPA: LoRA on query and value trains the same under the default fused attention — where
// query, key and value run as one joined transformer.LinearStack over the frozen bases, the adapters adding
// their terms into the packed buffer's column blocks — as under the two-pass path (one projection at a
// time): equal loss and adapter gradients to FP32 rounding, with attention dropout on
// (tiny-bert-random's attention_probs_dropout_prob), without and with lora_dropout.
func TestAdaptersUnderSDPA(t *testing.T) {
	batch := testBatch(3, 9, 30522, []int{9, 5, 7})
	for _, c := range []struct {
		pol     amp.Policy
		dropout float64
	}{{amp.FP32, 0}, {amp.BF16, 0}, {amp.FP32, 0.1}} {
		pol := c.pol
		var losses []float32
		var grads [][][]float32
		for _, impl := range []string{transformer.AttnSDPA, transformer.AttnEager} {
			base := loadTinyBert(t)
			if err := base.SetAttnImplementation(impl); err != nil {
				t.Fatal(err)
			}
			cfg := seqCls()
			cfg.LoraDropout = c.dropout
			m, err := Apply(base, cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			setParams(t, m, 24, trained)
			m.SetPolicy(pol)
			losses = append(losses, step(t, m, batch, 7))
			for i, l := range base.Layers {
				if st := l.Attention.Stack(); (st != nil && st.Joined()) != (impl == transformer.AttnSDPA) {
					t.Fatalf("%s: layer %d's stack %v", impl, i, st)
				}
			}
			var g [][]float32
			for _, np := range m.NamedParameters() {
				if np.Grad != nil {
					g = append(g, tensortest.Download(t, m.Backend(), np.Grad))
				}
			}
			grads = append(grads, g)
		}
		tol := 1e-5
		if pol.Enabled {
			tol = 2e-2
		}
		if e := relErr([]float32{losses[0]}, []float32{losses[1]}); e > tol {
			t.Errorf("%+v: loss sdpa %v, eager %v", c, losses[0], losses[1])
		}
		for i := range grads[1] {
			if e := relErr(grads[0][i], grads[1][i]); e > tol {
				t.Errorf("%+v: trainable gradient %d differs by %.3g between sdpa and eager", c, i, e)
			}
		}
	}
}
