package llama

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/transformertest"
)

// decodeTol is the per-position bound on cached vs full-forward logits (max|Δ|/max|ref|): FP32 must agree to
// rounding; under autocast the two paths round the same values through GEMMs of other shapes.
var decodeTol = map[string]float64{"fp32": 1e-5, "bf16": 2e-2, "fp16": 5e-3}

func randomIDs(n, vocab int, seed uint64) []int32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	return ids
}

// TestDecodeMatchesForward: on the four golden configurations of testdata/decoder (Llama with llama3 rope and
// GQA, Qwen2 with q/k/v biases, Qwen3 with q/k norms, Mistral), under FP32, BF16 and FP16, decoding with the
// key/value cache (a prefill, then one token at a time) gives the full forward's logits at every position,
// and greedy generation with the cache gives the tokens of generation without it (FP32).
func TestDecodeMatchesForward(t *testing.T) {
	for _, name := range []string{"llama_rope3", "qwen2_bias", "qwen3_qknorm", "mistral"} {
		t.Run(name, func(t *testing.T) {
			cfg := goldenConfig(t, openGolden(t, name+".safetensors"))
			tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
				m := detModel(t, b, cfg)
				ids := randomIDs(13, cfg.VocabSize, 3)
				for _, mode := range []string{"fp32", "bf16", "fp16"} {
					m.SetPolicy(goldenPolicies[mode])
					greedy := 0
					if mode == "fp32" {
						greedy = 8
					}
					e1 := transformertest.CheckDecode(t, m, ids, 1, decodeTol[mode], 0)
					e5 := transformertest.CheckDecode(t, m, ids, 5, decodeTol[mode], greedy)
					t.Logf("%s: worst position error %.3g (prefill 1), %.3g (prefill 5)", mode, e1, e5)
				}
			})
		})
	}
}

// TestDecodeWithLoRA: unmerged LoRA adapters (non-zero B) on q, k, v and down projections compute in the
// cached path as in the full forward, and a merged model decodes the same logits.
func TestDecodeWithLoRA(t *testing.T) {
	cfg := goldenConfig(t, openGolden(t, "qwen3_qknorm.safetensors"))
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		base := detModel(t, b, cfg)
		lc := lora.DefaultConfig()
		lc.TaskType, lc.LoraDropout = "CAUSAL_LM", 0.1
		lc.TargetModules = lora.TargetModules{Names: []string{"q_proj", "k_proj", "v_proj", "down_proj"}}
		m, err := lora.Apply(base, lc, 5)
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range m.Targets() {
			bv := make([]float32, m.Adapter(path).B.Value.Numel())
			for i := range bv {
				bv[i] = 0.2 * float32(math.Sin(float64(i)+1))
			}
			if err := b.Upload(m.Adapter(path).B.Value, bv); err != nil {
				t.Fatal(err)
			}
		}
		ids := randomIDs(11, cfg.VocabSize, 4)
		for _, pol := range []amp.Policy{amp.FP32, amp.BF16} {
			m.SetPolicy(pol)
			mode := map[amp.Policy]string{amp.FP32: "fp32", amp.BF16: "bf16"}[pol]
			e := transformertest.CheckDecode(t, m, ids, 4, decodeTol[mode], map[string]int{"fp32": 6}[mode])
			t.Logf("%s: worst position error %.3g", mode, e)
		}
		m.SetPolicy(amp.FP32)
		cache, err := m.NewKVCache(len(ids))
		if err != nil {
			t.Fatal(err)
		}
		defer cache.Free()
		unmerged, err := m.Decode(cache, ids, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Merge(); err != nil {
			t.Fatal(err)
		}
		cache.Reset()
		merged, err := m.Decode(cache, ids, true)
		if err != nil {
			t.Fatal(err)
		}
		base2 := detModel(t, b, cfg)
		cache2, err := base2.NewKVCache(len(ids))
		if err != nil {
			t.Fatal(err)
		}
		defer cache2.Free()
		plain, err := base2.Decode(cache2, ids, true)
		if err != nil {
			t.Fatal(err)
		}
		if e, _ := tensortest.RelErr(merged, unmerged); e > 1e-5 {
			t.Errorf("merged adapters decode other logits: relative error %.3g", e)
		}
		if e, _ := tensortest.RelErr(plain, unmerged); e < 1e-3 {
			t.Errorf("the adapters do not change the decoded logits (relative difference %.3g)", e)
		}
	})
}

// TestDecodeWithGradientCheckpointing: a model set to recompute its layers (their buffers overlaid in one
// arena region) decodes the full forward's logits, so generating after such a training run works.
func TestDecodeWithGradientCheckpointing(t *testing.T) {
	cfg := goldenConfig(t, openGolden(t, "qwen2_bias.safetensors"))
	m := detModel(t, cpuBackend(), cfg)
	m.SetGradientCheckpointing(true)
	transformertest.CheckDecode(t, m, randomIDs(9, cfg.VocabSize, 6), 3, 1e-5, 5)
}

// TestDecodeErrors: a cache of another model, of another policy, or too small is refused with a message.
func TestDecodeErrors(t *testing.T) {
	cfg := tinyConfig(t, "llama")
	b := cpuBackend()
	m, other := newModel(t, b, cfg, 1), newModel(t, b, cfg, 2)
	c, err := m.NewKVCache(4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free()
	if _, err := other.Decode(c, []int32{1}, false); err == nil {
		t.Error("another model's cache accepted")
	}
	m.SetPolicy(amp.BF16)
	if _, err := m.Decode(c, []int32{1}, false); err == nil {
		t.Error("an FP32 cache accepted under BF16")
	}
	m.SetPolicy(amp.FP32)
	if _, err := m.Decode(c, []int32{1, 2, 3, 4, 5}, false); err == nil {
		t.Error("5 tokens into a cache of 4 accepted")
	}
	if _, err := m.Decode(c, []int32{int32(cfg.VocabSize)}, false); err == nil {
		t.Error("a token outside the vocabulary accepted")
	}
	if c.Len != 0 {
		t.Errorf("failed calls filled %d positions", c.Len)
	}
	if _, err := m.NewKVCache(0); err == nil {
		t.Error("a cache of 0 positions accepted")
	}
}

// TestTokenAccuracyCounts: Forward's Correct (the LM head's device arg-max against the shifted labels) equals
// the host's count over the logits it returns, on every backend, FP32 and BF16, with half the targets set to
// the arg-max and one row padded.
func TestTokenAccuracyCounts(t *testing.T) {
	cfg := goldenConfig(t, openGolden(t, "llama_rope3.safetensors"))
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		m := detModel(t, b, cfg)
		for _, mode := range []string{"fp32", "bf16"} {
			m.SetPolicy(goldenPolicies[mode])
			batch := testBatch(2, 9, cfg.VocabSize, []int{9, 6})
			batch.Labels = nil
			out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			v := out.NumLabels
			argmax := func(i int) int64 {
				row := out.Logits[i*v : (i+1)*v]
				best := 0
				for j := range row {
					if row[j] > row[best] {
						best = j
					}
				}
				return int64(best)
			}
			labels := make([]int64, len(batch.InputIDs))
			want, total := 0, 0
			for i := range labels {
				labels[i] = int64(batch.InputIDs[i])
				if batch.AttentionMask[i] == 0 {
					labels[i] = -100
				}
				if i%9 > 0 && i%2 == 0 && labels[i] != -100 {
					labels[i] = argmax(i - 1)
				}
			}
			for i := range labels {
				if i%9 > 0 && labels[i] != -100 {
					total++
					if labels[i] == argmax(i-1) {
						want++
					}
				}
			}
			batch.Labels = labels
			out, err = m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			if out.Correct != want || out.Targets != total || want == 0 {
				t.Errorf("%s: Correct %d of %d, host %d of %d", mode, out.Correct, out.Targets, want, total)
			}
		}
	})
}
