package gpt2

import (
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/transformertest"
)

func randomIDs(n, vocab int, seed uint64) []int32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	return ids
}

// TestDecodeMatchesForward: the tiny GPT-2 checkpoints transformers saved (tied and untied heads), with and
// without PEFT's c_attn adapter (unmerged), decode with the key/value cache to the full forward's logits at
// every position under FP32, BF16 and FP16, and greedy generation with the cache gives the tokens of
// generation without it (FP32).
func TestDecodeMatchesForward(t *testing.T) {
	tol := map[amp.Policy]float64{amp.FP32: 1e-5, amp.BF16: 2e-2, amp.FP16: 5e-3}
	for _, c := range []struct{ dir, adapter string }{{"tiny", ""}, {"tiny_untied", ""}, {"tiny", "peft_adapter"}} {
		t.Run(c.dir+"+"+c.adapter, func(t *testing.T) {
			dir := goldenDir(t, c.dir)
			tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
				base, _, err := LoadPretrained(dir, b, transformer.LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var m transformertest.Decoder = base
				if c.adapter != "" {
					lm, err := lora.LoadAdapter(base, goldenDir(t, c.adapter))
					if err != nil {
						t.Fatal(err)
					}
					m = lm
				}
				ids := randomIDs(14, base.Config.VocabSize, 2)
				for _, pol := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
					m.SetPolicy(pol)
					greedy := 0
					if pol == amp.FP32 {
						greedy = 10
					}
					e1 := transformertest.CheckDecode(t, m, ids, 1, tol[pol], 0)
					e6 := transformertest.CheckDecode(t, m, ids, 6, tol[pol], greedy)
					t.Logf("%s: worst position error %.3g (prefill 1), %.3g (prefill 6)", pol.Precision(), e1, e6)
				}
			})
		})
	}
}

// TestDecodeCacheBounds: a cache beyond n_positions is refused; a model set to eager attention decodes too,
// also with gradient checkpointing on (the blocks' buffers overlaid).
func TestDecodeCacheBounds(t *testing.T) {
	b := cpu.New()
	cfg := tinyConfig()
	m := newTestModel(t, b, cfg, 3)
	if _, err := m.NewKVCache(cfg.NPositions + 1); err == nil {
		t.Error("a cache longer than n_positions accepted")
	}
	if err := m.SetAttnImplementation(transformer.AttnEager); err != nil {
		t.Fatal(err)
	}
	transformertest.CheckDecode(t, m, randomIDs(cfg.NPositions, cfg.VocabSize, 5), 3, 1e-5, 4)
	m.SetGradientCheckpointing(true)
	transformertest.CheckDecode(t, m, randomIDs(cfg.NPositions, cfg.VocabSize, 6), 2, 1e-5, 4)
}
