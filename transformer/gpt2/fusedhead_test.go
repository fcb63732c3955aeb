package gpt2

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
)

// TestBackwardSeedBitExact trains two accumulated micro-batches (seeds 0.75 and 0.25, padded rows labelled
// −100, the head in chunks of 4 rows) of GPT-2 (tied head, dropout 0.1) with and without
// ForwardOptions.BackwardSeed in FP32, BF16 and FP16, and requires the same bits: losses and every gradient.
func TestBackwardSeedBitExact(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		cfg := tinyConfig()
		cfg.ResidPdrop, cfg.EmbdPdrop, cfg.AttnPdrop = 0.1, 0.1, 0.1
		batches := [][]int{{7, 4}, {5, 5, 2}}
		seeds := []float32{0.75, 0.25}
		for _, pol := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
			t.Run(pol.Precision(), func(t *testing.T) {
				run := func(fused bool) (losses []float32, grads [][]float32) {
					m := newTestModel(t, b, cfg, 13)
					m.Head.ChunkElems = 4 * cfg.VocabSize
					m.SetPolicy(pol)
					if err := m.ZeroGrad(); err != nil {
						t.Fatal(err)
					}
					for i, lens := range batches {
						opts := transformer.ForwardOptions{Train: true, Seed: 21, Offset: uint64(i) << 20}
						if fused {
							opts.BackwardSeed = seeds[i]
						}
						out, err := m.Forward(testBatch(len(lens), 7, cfg.VocabSize, lens), opts)
						if err != nil {
							t.Fatal(err)
						}
						if err := m.Backward(seeds[i]); err != nil {
							t.Fatal(err)
						}
						losses = append(losses, out.Loss)
					}
					for _, np := range m.namedParameters() {
						g := make([]float32, np.Param.Grad.Numel())
						if err := b.Download(g, np.Param.Grad); err != nil {
							t.Fatal(err)
						}
						grads = append(grads, g)
					}
					return losses, grads
				}
				pl, pg := run(false)
				fl, fg := run(true)
				for i := range pl {
					if math.Float32bits(pl[i]) != math.Float32bits(fl[i]) {
						t.Errorf("micro-batch %d loss %v with BackwardSeed, %v without", i, fl[i], pl[i])
					}
				}
				for i := range pg {
					for j := range pg[i] {
						if math.Float32bits(pg[i][j]) != math.Float32bits(fg[i][j]) {
							t.Errorf("parameter %d: gradient differs at %d: %v with BackwardSeed, %v without", i, j, fg[i][j], pg[i][j])
							break
						}
					}
				}
			})
		}
	})
}
