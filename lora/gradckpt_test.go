package lora

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
)

// TestGradientCheckpointingBitExact: a LoRA model (query, value and intermediate.dense adapted, lora_dropout
// 0.1, hidden and attention dropout 0.1, 3 layers) trains a step with identical loss and adapter/head
// gradients, bit for bit, with and without gradient checkpointing of its base, in FP32, BF16 and FP16. The
// adapters' kept buffers share the arena region with their layer's, so a recomputation that drew other
// lora_dropout masks would show here.
func TestGradientCheckpointingBitExact(t *testing.T) {
	tensortest.ForEachBackend(t, gradientCheckpointingBitExact)
}

// gradientCheckpointingBitExact is TestGradientCheckpointingBitExact on backend b.
func gradientCheckpointingBitExact(t *testing.T, b tensor.Backend) {
	cfg := tinyConfig()
	cfg.NumHiddenLayers = 3
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0.1, 0.1
	lc := seqCls()
	lc.LoraDropout = 0.1
	lc.TargetModules = TargetModules{Names: []string{"query", "value", "intermediate.dense"}}
	batch := testBatch(3, 9, cfg.VocabSize, []int{9, 5, 3})
	for _, pol := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
		var losses []float32
		var grads [][][]float32
		var names []string
		for _, ckpt := range []bool{false, true} {
			m, err := Apply(newBase(t, b, cfg, 3), lc, 5)
			if err != nil {
				t.Fatal(err)
			}
			setParams(t, m, 9, trained) // non-zero B, so every adapter's gradient path is live
			m.SetPolicy(pol)
			m.SetGradientCheckpointing(ckpt)
			if m.GradientCheckpointing() != ckpt {
				t.Fatalf("GradientCheckpointing() = %v after SetGradientCheckpointing(%v)", !ckpt, ckpt)
			}
			losses = append(losses, step(t, m, batch, 11))
			var g [][]float32
			names = names[:0]
			for _, np := range m.NamedParameters() {
				if np.Trainable {
					names, g = append(names, np.Name), append(g, download(t, m, np))
				}
			}
			grads = append(grads, g)
		}
		if math.Float32bits(losses[0]) != math.Float32bits(losses[1]) {
			t.Errorf("%v: loss %v with checkpointing, %v without", pol.GemmDType(), losses[1], losses[0])
		}
		for i, name := range names {
			for j := range grads[0][i] {
				if math.Float32bits(grads[0][i][j]) != math.Float32bits(grads[1][i][j]) {
					t.Errorf("%v %s: gradient differs at %d: %v with checkpointing, %v without", pol.GemmDType(), name, j, grads[1][i][j], grads[0][i][j])
					break
				}
			}
		}
	}
}

// download returns np's gradient on the host.
func download(t *testing.T, m trainer.Model, np transformer.NamedParam) []float32 {
	t.Helper()
	g := make([]float32, np.Grad.Numel())
	if err := m.Backend().Download(g, np.Grad); err != nil {
		t.Fatal(err)
	}
	return g
}
