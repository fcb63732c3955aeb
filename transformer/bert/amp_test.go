package bert

import (
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer/transformertest"
)

// TestAutocastCloseToFP32 runs the same model and batch in FP32 and under BF16 and FP16 autocast: logits, loss
// and every gradient must agree within the dtype's precision (per-tensor max|a−b|/max|b|), gradients land in
// the FP32 master buffers, and the half copies come from the weight cache.
func TestAutocastCloseToFP32(t *testing.T) {
	cfg := tinyConfig()
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0.1, 0.1
	batch := testBatch(3, 8, cfg.VocabSize, cfg.NumLabels(), []int{8, 5, 2})
	b := cpuBackend()
	ref := newTestModel(t, b, cfg, 5)
	refOut := transformertest.Step(t, ref, batch, 11)
	for _, c := range []struct {
		policy    amp.Policy
		tolLogits float64
		tolGrads  float64
	}{
		{amp.BF16, 3e-2, 6e-2},
		{amp.FP16, 4e-3, 1e-2},
	} {
		t.Run(c.policy.String(), func(t *testing.T) {
			m := newTestModel(t, b, cfg, 5)
			m.SetPolicy(c.policy)
			out := transformertest.Step(t, m, batch, 11)
			if e, i := tensortest.RelErr(out.Logits, refOut.Logits); e > c.tolLogits {
				t.Errorf("logits relative error %.3g at %d (%v vs %v)", e, i, out.Logits[i], refOut.Logits[i])
			}
			if e, _ := tensortest.RelErr([]float32{out.Loss}, []float32{refOut.Loss}); e > c.tolLogits {
				t.Errorf("loss %v vs FP32 %v", out.Loss, refOut.Loss)
			}
			names, grads := modelGrads(t, m)
			_, refGrads := modelGrads(t, ref)
			errs, w := gradErrors(names, grads, refGrads)
			t.Logf("logits error %.3g, worst gradient error %.3g (%s)", must(tensortest.RelErr(out.Logits, refOut.Logits)),
				errs[w], names[w])
			if errs[w] > c.tolGrads {
				t.Errorf("gradient of %s: error %.3g > %.3g", names[w], errs[w], c.tolGrads)
			}
		})
	}
}
