package bert

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer/transformertest"
)

// tinyBertConfig is tiny-bert-random's shape: vocab 30,522, hidden 64, 2 layers, 4 heads, intermediate 128.
func tinyBertConfig() BertConfig {
	c := DefaultBertConfig()
	c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 64, 2, 4, 128
	c.HiddenDropoutProb, c.AttentionProbsDropoutProb = 0.1, 0.1
	return c
}

// BenchmarkTinyBertStep measures one training step (Forward + Backward, dropout on) of the tiny BERT on the CPU
// backend for a 16 × 64 batch, in FP32 and under BF16 autocast, and reports tokens/s.
func BenchmarkTinyBertStep(b *testing.B) {
	for _, policy := range []amp.Policy{amp.FP32, amp.BF16} {
		b.Run(policy.Precision(), func(b *testing.B) {
			cfg := tinyBertConfig()
			m := newTestModel(b, cpuBackend(), cfg, 1)
			m.SetPolicy(policy)
			lens := make([]int, 16)
			for i := range lens {
				lens[i] = 64 - 3*i
			}
			batch := testBatch(16, 64, cfg.VocabSize, 2, lens)
			transformertest.Step(b, m, batch, 0)
			b.ResetTimer()
			for i := range b.N {
				transformertest.Step(b, m, batch, uint64(i))
			}
			b.ReportMetric(float64(b.N*batch.B*batch.T)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkTinyRecipeStep measures one training step (Forward + Backward, dropout 0.1) of recipes/tiny.yaml's
// model (vocabulary 256, hidden 64, 2 layers, 4 heads, intermediate 128) on a batch shaped like that recipe's
// (32 sentences of 12–20 tokens, padded to 20), in FP32 on the CPU backend: the step `make run` repeats 500
// times. It reports ms/step; `-cpuprofile` on it shows where a `make run` step goes.
func BenchmarkTinyRecipeStep(b *testing.B) {
	cfg := DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads = 256, 64, 2, 4
	cfg.IntermediateSize, cfg.MaxPositionEmbeddings = 128, 64
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0.1, 0.1
	m := newTestModel(b, cpuBackend(), cfg, 1)
	lens := make([]int, 32)
	for i := range lens {
		lens[i] = 12 + (i*5)%9
	}
	batch := testBatch(32, 20, cfg.VocabSize, 2, lens)
	transformertest.Step(b, m, batch, 0)
	b.ResetTimer()
	for i := range b.N {
		transformertest.Step(b, m, batch, uint64(i))
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/step")
}

// TestBaseShapeRuns runs the bert-base shape (12 layers, hidden 768, 12 heads, vocab 30,522) forward and
// backward on the CPU for a 2 × 16 batch with dropout and checks the outputs and gradients are finite and
// non-zero. (TestGoldenBaseShape compares the same shape with transformers once its golden exists.)
func TestBaseShapeRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("bert-base forward+backward on the CPU takes ~15 s; run without -short")
	}
	cfg := DefaultBertConfig()
	m, err := NewBertForSequenceClassification(cpuBackend(), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	batch := testBatch(2, 16, cfg.VocabSize, 2, []int{16, 11})
	out := transformertest.Step(t, m, batch, 3)
	_, grads, _ := m.Trainable()
	norm, err := m.Backend().GlobalNorm([]*tensor.Tensor{grads})
	if err != nil {
		t.Fatal(err)
	}
	if math.IsNaN(float64(out.Loss)) || math.IsNaN(norm) || norm == 0 {
		t.Fatalf("loss %v, gradient norm %v", out.Loss, norm)
	}
	t.Logf("loss %.4f (ln 2 = 0.6931 expected near init), gradient norm %.4g, arena %d MiB", out.Loss, norm, m.Arena().Bytes()>>20)
}
