package llama

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
)

// TestGradientCheckpointingBitExact trains two accumulated steps of 3-layer Llama, Qwen2 and Qwen3 models,
// full and with LoRA adapters (lora_dropout 0.1, so the recomputation must redraw the same masks), with and
// without gradient checkpointing, in FP32, BF16 and FP16, and requires the same bits: both losses and every
// trainable gradient. Layers 0 and 1 are recomputed; their buffers are shared with layer 2's.
func TestGradientCheckpointingBitExact(t *testing.T) {
	tensortest.ForEachBackend(t, gradientCheckpointingBitExact)
}

// gradientCheckpointingBitExact is TestGradientCheckpointingBitExact on backend b.
func gradientCheckpointingBitExact(t *testing.T, b tensor.Backend) {
	for _, typ := range []string{"llama", "qwen2", "qwen3"} {
		for _, withLoRA := range []bool{false, true} {
			for _, pol := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
				name := typ + "/" + pol.Precision()
				if withLoRA {
					name += "/lora"
				}
				t.Run(name, func(t *testing.T) {
					cfg := tinyConfig(t, typ)
					cfg.NumHiddenLayers = 3
					batches := [][]int{{6, 3, 5}, {4, 4}}
					run := func(ckpt bool) (losses []float32, grads [][]float32, names []string) {
						var m transformer.Model = newModel(t, b, cfg, 3)
						if withLoRA {
							lc := lora.DefaultConfig()
							lc.TaskType, lc.LoraDropout = "CAUSAL_LM", 0.1
							lc.TargetModules = lora.TargetModules{Names: []string{"q_proj", "v_proj", "down_proj"}}
							lm, err := lora.Apply(m.(*ForCausalLM), lc, 5)
							if err != nil {
								t.Fatal(err)
							}
							m = lm
						}
						m.SetPolicy(pol)
						gc := m.(transformer.GradientCheckpointer)
						gc.SetGradientCheckpointing(ckpt)
						if gc.GradientCheckpointing() != ckpt {
							t.Fatalf("GradientCheckpointing() = %v, want %v", !ckpt, ckpt)
						}
						if err := m.ZeroGrad(); err != nil {
							t.Fatal(err)
						}
						for i, lens := range batches {
							out, err := m.Forward(testBatch(len(lens), 6, cfg.VocabSize, lens),
								transformer.ForwardOptions{Train: true, Seed: 9, Offset: uint64(i) << 20})
							if err != nil {
								t.Fatal(err)
							}
							if err := m.Backward(0.5); err != nil {
								t.Fatal(err)
							}
							losses = append(losses, out.Loss)
						}
						for _, np := range m.NamedParameters() {
							if np.Trainable {
								g := make([]float32, np.Grad.Numel())
								if err := b.Download(g, np.Grad); err != nil {
									t.Fatal(err)
								}
								grads, names = append(grads, g), append(names, np.Name)
							}
						}
						return losses, grads, names
					}
					pl, pg, names := run(false)
					cl, cg, _ := run(true)
					for i := range pl {
						if math.Float32bits(pl[i]) != math.Float32bits(cl[i]) {
							t.Errorf("step %d loss %v with checkpointing, %v without", i, cl[i], pl[i])
						}
					}
					for i, name := range names {
						for j := range pg[i] {
							if math.Float32bits(pg[i][j]) != math.Float32bits(cg[i][j]) {
								t.Errorf("%s: gradient differs at %d: %v with checkpointing, %v without", name, j, cg[i][j], pg[i][j])
								break
							}
						}
					}
				})
			}
		}
	}
}

// TestGradientCheckpointingArena: with checkpointing the carved arena is smaller (one layer's buffers
// instead of three).
func TestGradientCheckpointingArena(t *testing.T) {
	cfg := tinyConfig(t, "llama")
	cfg.NumHiddenLayers = 3
	m := newModel(t, cpuBackend(), cfg, 3)
	if err := m.Reserve(4, 16); err != nil {
		t.Fatal(err)
	}
	plain := m.Arena().Bytes()
	m.SetGradientCheckpointing(true)
	m.Arena().Free()
	if err := m.Reserve(4, 16); err != nil {
		t.Fatal(err)
	}
	if ck := m.Arena().Bytes(); ck >= plain {
		t.Errorf("arena %d bytes with gradient checkpointing, %d without", ck, plain)
	} else {
		t.Logf("arena %d → %d bytes", plain, ck)
	}
}
