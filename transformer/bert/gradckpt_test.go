package bert

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/transformertest"
)

// TestGradientCheckpointingBitExact trains two steps (Philox offsets 0 and 1<<20) of a 3-layer model with
// hidden and attention dropout on and a padded batch, with and without gradient checkpointing, and requires
// the same bits: loss, logits and every gradient, under FP32, BF16 and FP16 and both attention paths, on
// every backend (a deterministic backend gives the same bits for the same op sequence). With
// checkpointing the layers' internal activations share one arena region, so a recomputation that drew other
// dropout masks or read a stale buffer changes the gradients of layers 0 and 1.
func TestGradientCheckpointingBitExact(t *testing.T) {
	tensortest.ForEachBackend(t, gradientCheckpointingBitExact)
}

// gradientCheckpointingBitExact is TestGradientCheckpointingBitExact on backend b.
func gradientCheckpointingBitExact(t *testing.T, b tensor.Backend) {
	cfg := tinyConfig()
	cfg.NumHiddenLayers = 3
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0.1, 0.2
	batches := []*loaders.Batch{
		testBatch(3, 7, cfg.VocabSize, 3, []int{7, 4, 2}),
		testBatch(2, 5, cfg.VocabSize, 3, []int{5, 3}),
	}
	for _, mode := range []struct {
		name string
		pol  amp.Policy
	}{{"fp32", amp.FP32}, {"bf16", amp.BF16}, {"fp16", amp.FP16}} {
		for _, impl := range []string{transformer.AttnSDPA, transformer.AttnEager} {
			t.Run(mode.name+"/"+impl, func(t *testing.T) {
				type result struct {
					loss   []float32
					logits [][]float32
					grads  [][]float32
				}
				run := func(ckpt bool) (r result, names []string) {
					m := newTestModel(t, b, cfg, 5)
					if err := m.SetAttnImplementation(impl); err != nil {
						t.Fatal(err)
					}
					m.SetPolicy(mode.pol)
					m.SetGradientCheckpointing(ckpt)
					if m.GradientCheckpointing() != ckpt {
						t.Fatalf("GradientCheckpointing() = %v, want %v", !ckpt, ckpt)
					}
					if err := m.ZeroGrad(); err != nil {
						t.Fatal(err)
					}
					for i, batch := range batches { // gradients accumulate over both steps
						out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true, Train: true, Seed: 77, Offset: uint64(i) << 20})
						if err != nil {
							t.Fatal(err)
						}
						if err := m.Backward(0.5); err != nil {
							t.Fatal(err)
						}
						r.loss, r.logits = append(r.loss, out.Loss), append(r.logits, out.Logits)
					}
					names, r.grads = modelGrads(t, m)
					return r, names
				}
				plain, names := run(false)
				ck, _ := run(true)
				for i := range plain.loss {
					if math.Float32bits(plain.loss[i]) != math.Float32bits(ck.loss[i]) {
						t.Errorf("step %d loss: %v with checkpointing, %v without", i, ck.loss[i], plain.loss[i])
					}
					if j := firstDiff(ck.logits[i], plain.logits[i]); j >= 0 {
						t.Errorf("step %d logits differ at %d: %v vs %v", i, j, ck.logits[i][j], plain.logits[i][j])
					}
				}
				for i, name := range names {
					if j := firstDiff(ck.grads[i], plain.grads[i]); j >= 0 {
						t.Errorf("%s: gradient differs at %d: %v with checkpointing, %v without", name, j, ck.grads[i][j], plain.grads[i][j])
					}
				}
			})
		}
	}
}

// firstDiff returns the first index where a and b differ in their bits, or −1 (also −1 for two nil slices).
func firstDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestGradientCheckpointingPlan checks from the arena layout (PlanArena, nothing allocated) that checkpointing
// keeps one layer's internal activations instead of L: the arena shrinks by at least (L−1)/L of the per-layer
// part, the internal buffers of layers 1..L−1 are marked Shared, and the layer inputs stay kept.
func TestGradientCheckpointingPlan(t *testing.T) {
	b := cpuBackend()
	cfg := tinyConfig()
	cfg.NumHiddenLayers = 4
	cfg.HiddenDropoutProb = 0.1
	for _, pol := range []amp.Policy{amp.FP32, amp.BF16} {
		m := newTestModel(t, b, cfg, 1)
		m.SetPolicy(pol)
		_, plain, err := m.PlanArena(4, 16)
		if err != nil {
			t.Fatal(err)
		}
		m.SetGradientCheckpointing(true)
		bufs, ck, err := m.PlanArena(4, 16)
		if err != nil {
			t.Fatal(err)
		}
		var shared, kept int64
		for _, bf := range bufs {
			if bf.Shared {
				shared += bf.Bytes()
			} else {
				kept += bf.Bytes()
			}
		}
		if shared == 0 {
			t.Fatalf("%v: no buffer is shared under gradient checkpointing", pol.GemmDType())
		}
		perLayer := shared / int64(cfg.NumHiddenLayers-1) // each of layers 1..L−1 lays its buffers over layer 0's
		if want := plain - shared + int64(cfg.NumHiddenLayers)*4*16*int64(cfg.HiddenSize)*4; ck > want {
			t.Errorf("%v: arena %d bytes with checkpointing, want ≤ %d (without %d, %d per layer shared)", pol.GemmDType(), ck, want, plain, perLayer)
		}
		if ck >= plain {
			t.Errorf("%v: arena %d bytes with checkpointing, %d without", pol.GemmDType(), ck, plain)
		}
		t.Logf("%v: arena %d → %d bytes (kept buffers %d, shared %d)", pol.GemmDType(), plain, ck, kept, shared)
		// The model still trains after planning (the views are carved anew).
		transformertest.Step(t, m, testBatch(2, 5, cfg.VocabSize, 3, []int{5, 3}), 1)
	}
}
