package transformer_test

import (
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/bert"
	"github.com/tune-ml/tune/transformer/detweights"
)

// TestKeepPlanBitExact: an encoder layer keeps only the GEMM inputs a trained parameter's gradient reads, and a
// frozen feed-forward block keeps its input instead of its (N, I) pre-activation, recomputing it in backward.
// With LoRA on query/value, LoRA on every Linear, only the classifier trained, and full fine-tuning, in FP32,
// BF16 and FP16 (frozen weights stored in half, as the trainer does), with and without gradient checkpointing,
// one training step gives the loss and every gradient of the layout that keeps everything, bit for bit, and the
// arena of the frozen configurations is smaller.
func TestKeepPlanBitExact(t *testing.T) {
	tensortest.ForEachBackend(t, keepPlanBitExact)
}

func keepPlanBitExact(t *testing.T, b tensor.Backend) {
	cfg := bert.DefaultBertConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 50, 32, 3, 2, 64
	cfg.MaxPositionEmbeddings, cfg.ID2Label = 16, bert.DefaultLabels(3)
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0.1, 0.1
	batch := keepBatch(3, 9, cfg.VocabSize, []int{9, 5, 3})
	for _, tc := range []struct {
		name    string
		targets []string // LoRA target modules; nil: no LoRA
		only    string   // train only parameters with this prefix (no LoRA)
		smaller bool     // the arena shrinks
	}{
		{"LoRA query,value", []string{"query", "value"}, "", true},
		{"LoRA every Linear", []string{"query", "key", "value", "dense"}, "", false},
		{"classifier only", nil, "classifier.", true},
		{"full", nil, "", false},
	} {
		for _, pol := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
			for _, ckpt := range []bool{false, true} {
				name := tc.name + "/" + pol.Precision()
				if ckpt {
					name += "/checkpointing"
				}
				t.Run(name, func(t *testing.T) {
					var losses []float32
					var grads [][]float32
					var arena []int64
					for _, all := range []bool{true, false} {
						restore := transformer.SetKeepPlan(all, 0) // recompute u at any size
						m, base := keepModel(t, b, cfg, tc.targets, tc.only, pol, ckpt)
						_, n, err := base.PlanArena(batch.B, batch.T)
						if err != nil {
							t.Fatal(err)
						}
						loss, g := keepStep(t, m, batch)
						restore()
						losses, grads, arena = append(losses, loss), append(grads, g), append(arena, n)
					}
					if math.Float32bits(losses[0]) != math.Float32bits(losses[1]) {
						t.Errorf("loss %v, keeping everything %v", losses[1], losses[0])
					}
					for j := range grads[0] {
						if math.Float32bits(grads[0][j]) != math.Float32bits(grads[1][j]) {
							t.Errorf("gradient element %d of %d: %v, keeping everything %v", j, len(grads[0]), grads[1][j], grads[0][j])
							break
						}
					}
					if smaller := arena[1] < arena[0]; smaller != tc.smaller || arena[1] > arena[0] {
						t.Errorf("arena %d bytes, keeping everything %d (want smaller: %v)", arena[1], arena[0], tc.smaller)
					}
				})
			}
		}
	}
}

// keepModel builds the test model: a BERT with detweights values, adapted by LoRA on targets or trained only
// on parameters prefixed only, under pol (frozen projections stored in half), with checkpointing as asked.
func keepModel(t *testing.T, b tensor.Backend, cfg bert.BertConfig, targets []string, only string, pol amp.Policy, ckpt bool) (trainer.Model, *bert.BertForSequenceClassification) {
	t.Helper()
	base, err := bert.NewBertForSequenceClassification(b, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	base.SetGradientCheckpointing(ckpt)
	var m interface {
		trainer.Model
		StoreFrozenIn(tensor.DType) error
	} = base
	if targets != nil {
		lc := lora.DefaultConfig()
		lc.R, lc.LoraAlpha, lc.TaskType = 4, 8, lora.TaskSeqCls
		lc.TargetModules = lora.TargetModules{Names: targets}
		lm, err := lora.Apply(base, lc, 5)
		if err != nil {
			t.Fatal(err)
		}
		m = lm
	} else if only != "" {
		if err := base.SetTrainable(func(name string) bool { return strings.HasPrefix(name, only) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, np := range m.NamedParameters() { // every weight non-zero (LoRA's B too), so every gradient path is live
		if err := b.Upload(np.Value, detweights.Values(9, np.Name, np.Value.Shape)); err != nil {
			t.Fatal(err)
		}
	}
	m.WeightsUpdated()
	m.SetPolicy(pol)
	if pol.Enabled {
		if err := m.StoreFrozenIn(pol.DType); err != nil {
			t.Fatal(err)
		}
	}
	return m, base
}

// keepStep runs one training Forward and Backward and returns the loss and every trainable gradient, in order.
func keepStep(t *testing.T, m trainer.Model, batch *loaders.Batch) (float32, []float32) {
	t.Helper()
	if err := m.ZeroGrad(); err != nil {
		t.Fatal(err)
	}
	out, err := m.Forward(batch, trainer.ForwardOptions{Train: true, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Backward(1); err != nil {
		t.Fatal(err)
	}
	_, g, _ := m.Trainable()
	host := make([]float32, g.Numel())
	if err := m.Backend().Download(host, g); err != nil {
		t.Fatal(err)
	}
	return out.Loss, host
}

// keepBatch is a (b, t) batch whose row i has lens[i] tokens, then padding; token types 1 on the second half.
func keepBatch(b, t, vocab int, lens []int) *loaders.Batch {
	bt := &loaders.Batch{B: b, T: t, InputIDs: make([]int32, b*t), TokenTypeIDs: make([]int32, b*t),
		AttentionMask: make([]int32, b*t), Labels: make([]int64, b)}
	x := uint64(4242)
	for i := range b {
		for j := range lens[i] {
			x = detweights.SplitMix64(x)
			bt.InputIDs[i*t+j] = int32(1 + x%uint64(vocab-1))
			bt.AttentionMask[i*t+j] = 1
			if j >= lens[i]/2 {
				bt.TokenTypeIDs[i*t+j] = 1
			}
		}
		bt.Labels[i] = int64(i % 3)
	}
	return bt
}

// gemmCounter counts the GEMMs it passes on.
type gemmCounter struct {
	tensor.Backend
	n int
}

// Gemm counts and runs a on the inner backend.
func (g *gemmCounter) Gemm(a tensor.GemmArgs) error { g.n++; return g.Backend.Gemm(a) }

// TestFrozenEmbeddingsSkipFirstInputGrad: over frozen embeddings (LoRA) the first layer's Q, K and V skip
// their input-gradient GEMMs, as autograd does, and every trained gradient is the same bit for bit as when an
// observer makes the model compute them (an observer is shown the full gradient of the embeddings' output).
func TestFrozenEmbeddingsSkipFirstInputGrad(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		cfg := bert.DefaultBertConfig()
		cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 50, 32, 2, 2, 64
		cfg.MaxPositionEmbeddings, cfg.ID2Label = 16, bert.DefaultLabels(3)
		batch := keepBatch(3, 9, cfg.VocabSize, []int{9, 5, 3})
		var grads [2][]float32
		var gemms [2]int
		for i, observe := range []bool{false, true} {
			gc := &gemmCounter{Backend: b}
			m, _ := keepModel(t, gc, cfg, []string{"query", "value"}, "", amp.BF16, false)
			opts := trainer.ForwardOptions{Train: true, Seed: 11}
			if observe {
				opts.Observe = func(string, bool, *tensor.Tensor) error { return nil }
			}
			if err := m.ZeroGrad(); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Forward(batch, opts); err != nil {
				t.Fatal(err)
			}
			before := gc.n
			if err := m.Backward(1); err != nil {
				t.Fatal(err)
			}
			gemms[i] = gc.n - before
			_, g, _ := m.Trainable()
			grads[i] = make([]float32, g.Numel())
			if err := b.Download(grads[i], g); err != nil {
				t.Fatal(err)
			}
		}
		// the packed base projections (query, key, value as one LinearStack) skip their one dX product, the
		// LoRA-wrapped query and value their adapters' one grouped dX product (stacked lora_A)
		if gemms[1]-gemms[0] != 2 {
			t.Errorf("backward ran %d GEMMs, %d with an observer: want 2 fewer", gemms[0], gemms[1])
		}
		for j := range grads[0] {
			if math.Float32bits(grads[0][j]) != math.Float32bits(grads[1][j]) {
				t.Fatalf("gradient element %d: %v, with every input gradient %v", j, grads[0][j], grads[1][j])
			}
		}
	})
}
