package gpt2

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
)

// TestGradientCheckpointingBitExact trains two accumulated steps of a 3-block GPT-2 with attention, residual
// and embedding dropout 0.1, with and without gradient checkpointing, on both attention paths in FP32, BF16
// and FP16, and requires the same bits: both losses and every gradient. Blocks 0 and 1 are recomputed with
// their buffers shared with block 2's, so other dropout masks or a stale buffer would show.
func TestGradientCheckpointingBitExact(t *testing.T) {
	tensortest.ForEachBackend(t, gradientCheckpointingBitExact)
}

// gradientCheckpointingBitExact is TestGradientCheckpointingBitExact on backend b.
func gradientCheckpointingBitExact(t *testing.T, b tensor.Backend) {
	cfg := tinyConfig()
	cfg.NLayer = 3
	cfg.ResidPdrop, cfg.EmbdPdrop, cfg.AttnPdrop = 0.1, 0.1, 0.1
	batches := [][]int{{7, 4}, {5, 5, 2}}
	for _, impl := range []string{transformer.AttnSDPA, transformer.AttnEager} {
		for _, pol := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
			t.Run(impl+"/"+pol.Precision(), func(t *testing.T) {
				run := func(ckpt bool) (losses []float32, grads [][]float32, arena int) {
					m := newTestModel(t, b, cfg, 13)
					if err := m.SetAttnImplementation(impl); err != nil {
						t.Fatal(err)
					}
					m.SetPolicy(pol)
					m.SetGradientCheckpointing(ckpt)
					if m.GradientCheckpointing() != ckpt {
						t.Fatalf("GradientCheckpointing() = %v, want %v", !ckpt, ckpt)
					}
					if err := m.ZeroGrad(); err != nil {
						t.Fatal(err)
					}
					for i, lens := range batches {
						out, err := m.Forward(testBatch(len(lens), 7, cfg.VocabSize, lens),
							transformer.ForwardOptions{Train: true, Seed: 21, Offset: uint64(i) << 20})
						if err != nil {
							t.Fatal(err)
						}
						if err := m.Backward(0.5); err != nil {
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
					return losses, grads, m.Arena().Bytes()
				}
				pl, pg, pa := run(false)
				cl, cg, ca := run(true)
				for i := range pl {
					if math.Float32bits(pl[i]) != math.Float32bits(cl[i]) {
						t.Errorf("step %d loss %v with checkpointing, %v without", i, cl[i], pl[i])
					}
				}
				names := newTestModel(t, cpu.New(), cfg, 13).namedParameters()
				for i := range pg {
					for j := range pg[i] {
						if math.Float32bits(pg[i][j]) != math.Float32bits(cg[i][j]) {
							t.Errorf("%s: gradient differs at %d: %v with checkpointing, %v without", names[i].Name, j, cg[i][j], pg[i][j])
							break
						}
					}
				}
				if ca >= pa {
					t.Errorf("arena %d bytes with checkpointing, %d without", ca, pa)
				}
			})
		}
	}
}
