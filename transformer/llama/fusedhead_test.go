package llama

import (
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
)

// TestBackwardSeedBitExact trains two accumulated micro-batches (seeds 0.75 and 0.25, padded rows labelled
// −100, the head in chunks of 5 rows so some chunks have no target) of tied and untied models, full and with
// LoRA, in FP32, BF16 and FP16, with and without ForwardOptions.BackwardSeed, and requires the same bits: both
// losses and every trainable gradient (the tied embedding's included). A Backward with another seed than the
// promised one is an error.
func TestBackwardSeedBitExact(t *testing.T) {
	tensortest.ForEachBackend(t, backwardSeedBitExact)
}

func backwardSeedBitExact(t *testing.T, b tensor.Backend) {
	for _, typ := range []string{"llama", "qwen2"} {
		for _, withLoRA := range []bool{false, true} {
			for _, pol := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
				name := typ + "/" + pol.Precision()
				if withLoRA {
					name += "/lora"
				}
				t.Run(name, func(t *testing.T) {
					cfg := tinyConfig(t, typ)
					cfg.TieWordEmbeddings = typ == "qwen2"
					batches := [][]int{{6, 3, 5}, {4, 2}}
					seeds := []float32{0.75, 0.25}
					build := func() (transformer.Model, *ForCausalLM) {
						base := newModel(t, b, cfg, 3)
						base.Head.ChunkElems = 5 * cfg.VocabSize
						var m transformer.Model = base
						if withLoRA {
							lc := lora.DefaultConfig()
							lc.TaskType = "CAUSAL_LM"
							lc.TargetModules = lora.TargetModules{Regex: lora.AllLinear}
							lm, err := lora.Apply(base, lc, 5)
							if err != nil {
								t.Fatal(err)
							}
							m = lm
						}
						m.SetPolicy(pol)
						if err := m.ZeroGrad(); err != nil {
							t.Fatal(err)
						}
						return m, base
					}
					run := func(fused bool) (losses []float32, grads [][]float32, names []string) {
						m, _ := build()
						for i, lens := range batches {
							opts := transformer.ForwardOptions{Train: true, Seed: 9, Offset: uint64(i) << 20}
							if fused {
								opts.BackwardSeed = seeds[i]
							}
							out, err := m.Forward(testBatch(len(lens), 6, cfg.VocabSize, lens), opts)
							if err != nil {
								t.Fatal(err)
							}
							if err := m.Backward(seeds[i]); err != nil {
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
					fl, fg, _ := run(true)
					for i := range pl {
						if math.Float32bits(pl[i]) != math.Float32bits(fl[i]) {
							t.Errorf("micro-batch %d loss %v with BackwardSeed, %v without", i, fl[i], pl[i])
						}
					}
					for i, name := range names {
						for j := range pg[i] {
							if math.Float32bits(pg[i][j]) != math.Float32bits(fg[i][j]) {
								t.Errorf("%s: gradient differs at %d: %v with BackwardSeed, %v without", name, j, fg[i][j], pg[i][j])
								break
							}
						}
					}
					m, _ := build()
					if _, err := m.Forward(testBatch(2, 6, cfg.VocabSize, []int{6, 4}),
						transformer.ForwardOptions{Train: true, BackwardSeed: 1}); err != nil {
						t.Fatal(err)
					}
					if err := m.Backward(0.5); err == nil || !strings.Contains(err.Error(), "BackwardSeed") {
						t.Errorf("Backward(0.5) after BackwardSeed 1: %v, want an error naming BackwardSeed", err)
					}
				})
			}
		}
	}
}
