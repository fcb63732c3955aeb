package lora

import (
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
)

// TestAdaptersUnderSDPA: LoRA on query and value (whose wrappers write their own (B, T, C) projection buffers)
// trains the same under the default fused attention as under the two-pass path: equal loss and adapter
// gradients to FP32 rounding, with attention dropout on (tiny-bert-random's attention_probs_dropout_prob).
func TestAdaptersUnderSDPA(t *testing.T) {
	batch := testBatch(3, 9, 30522, []int{9, 5, 7})
	for _, pol := range []amp.Policy{amp.FP32, amp.BF16} {
		var losses []float32
		var grads [][][]float32
		for _, impl := range []string{transformer.AttnSDPA, transformer.AttnEager} {
			base := loadTinyBert(t)
			if err := base.SetAttnImplementation(impl); err != nil {
				t.Fatal(err)
			}
			m, err := Apply(base, seqCls(), 1)
			if err != nil {
				t.Fatal(err)
			}
			setParams(t, m, 24, trained)
			m.SetPolicy(pol)
			losses = append(losses, step(t, m, batch, 7))
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
			t.Errorf("%v: loss sdpa %v, eager %v", pol, losses[0], losses[1])
		}
		for i := range grads[1] {
			if e := relErr(grads[0][i], grads[1][i]); e > tol {
				t.Errorf("%v: trainable gradient %d differs by %.3g between sdpa and eager", pol, i, e)
			}
		}
	}
}
