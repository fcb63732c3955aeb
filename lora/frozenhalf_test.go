package lora

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/gpt2"
	"github.com/tune-ml/tune/transformer/llama"
)

// TestFrozenStoredInHalf: after StoreFrozenIn(dtype) under FP16/BF16 autocast the frozen base projections
// live in that dtype only (no FP32 copy, no gradient, not in the trainable buffer AdamW updates), the loss and
// every trainable gradient of a training step are bit-identical to the FP32-master model (the per-step cast
// rounded the same values), the saved adapter is byte-identical, a Forward under FP32 refuses, a merge into the
// half base matches the FP32-base merge within the dtype's rounding, and StoreFrozenIn(F32) widens back.
func TestFrozenStoredInHalf(t *testing.T) {
	cfg := tinyConfig()
	batch := testBatch(3, 10, cfg.VocabSize, []int{10, 6, 8})
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		for _, p := range []amp.Policy{amp.FP16, amp.BF16} {
			t.Run(p.String(), func(t *testing.T) {
				build := func() *Model {
					m, err := Apply(newBase(t, b, cfg, 28), seqCls(), 28)
					if err != nil {
						t.Fatal(err)
					}
					setParams(t, m, 5, trained)
					m.SetPolicy(p)
					return m
				}
				ref, m := build(), build()
				must(t, m.StoreFrozenIn(p.DType))
				if m.FrozenDType() != p.DType {
					t.Fatalf("FrozenDType %v, want %v", m.FrozenDType(), p.DType)
				}
				frozenProj := map[string]bool{}
				for _, mp := range m.Projections() {
					for _, np := range mp.Projection.Base().Parameters() {
						if np.Param.Grad == nil {
							name := mp.Path + ".base_layer." + np.Name
							if _, ok := mp.Projection.(*Linear); !ok {
								name = mp.Path + "." + np.Name
							}
							frozenProj[name] = true
						}
					}
				}
				if len(frozenProj) == 0 {
					t.Fatal("no frozen projection parameter")
				}
				var refBytes, gotBytes, halfElems int
				refByName := map[string]*tensor.Tensor{}
				for _, np := range ref.NamedParameters() {
					refBytes += np.Value.Bytes()
					refByName[np.Name] = np.Value
				}
				trainBuf, grads, _ := m.Trainable()
				refTrain, refGrads, _ := ref.Trainable()
				for _, np := range m.NamedParameters() {
					gotBytes += np.Value.Bytes()
					switch {
					case frozenProj[np.Name]:
						halfElems += np.Value.Numel()
						if np.Value.DType != p.DType || np.Grad != nil || np.Trainable || np.Value.Buf == trainBuf.Buf {
							t.Errorf("%s: %v, grad %v, trainable %v: want a frozen %v tensor outside the trainable buffer",
								np.Name, np.Value.DType, np.Grad, np.Trainable, p.DType)
						}
					case np.Value.DType != tensor.F32:
						t.Errorf("%s is %v, want F32 (only frozen projections are stored in half)", np.Name, np.Value.DType)
					}
					if np.Trainable && np.Grad == nil {
						t.Errorf("%s trains but has no gradient", np.Name)
					}
				}
				if want := refBytes - 2*halfElems; gotBytes != want {
					t.Errorf("parameters hold %d bytes, want %d (FP32 model %d minus 2 bytes per frozen projection element)",
						gotBytes, want, refBytes)
				}
				if trainBuf.Numel() != refTrain.Numel() || grads.Numel() != refGrads.Numel() {
					t.Errorf("trainable buffer %d / grads %d, want %d / %d", trainBuf.Numel(), grads.Numel(), refTrain.Numel(), refGrads.Numel())
				}
				// One training step: same loss, same gradients, bit for bit.
				lr, lm := step(t, ref, batch, 11), step(t, m, batch, 11)
				if lr != lm {
					t.Errorf("loss %v, want %v (FP32 masters cast per step)", lm, lr)
				}
				gr, gm := make([]float32, refGrads.Numel()), make([]float32, grads.Numel())
				must(t, b.Download(gr, refGrads))
				must(t, b.Download(gm, grads))
				if !slices.Equal(gr, gm) {
					t.Errorf("gradients differ: max |Δ| %g", must2(tensortest.MaxAbsDiff(gm, gr)))
				}
				// The adapter checkpoint is unchanged.
				dr, dm := t.TempDir(), t.TempDir()
				must(t, ref.Save(dr))
				must(t, m.Save(dm))
				fr, err := os.ReadFile(filepath.Join(dr, "adapter_model.safetensors"))
				must(t, err)
				fm, err := os.ReadFile(filepath.Join(dm, "adapter_model.safetensors"))
				must(t, err)
				if !bytes.Equal(fr, fm) {
					t.Error("adapter_model.safetensors differs")
				}
				// FP32 and the other half dtype refuse rather than compute with rounded weights.
				other := amp.BF16
				if p == amp.BF16 {
					other = amp.FP16
				}
				for _, q := range []amp.Policy{amp.FP32, other} {
					m.SetPolicy(q)
					if _, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true}); err == nil || !strings.Contains(err.Error(), "reload the model") {
						t.Errorf("Forward under %s with half frozen weights: err %v, want a reload-the-model error", q, err)
					}
				}
				if err := m.StoreFrozenIn(other.DType); err == nil {
					t.Errorf("StoreFrozenIn(%v) after %v: no error", other.DType, p.DType)
				}
				m.SetPolicy(p)
				// Merge into the half base: within the dtype's rounding of the FP32-base merge.
				must(t, ref.Merge())
				must(t, m.Merge())
				if d, _ := tensortest.MaxAbsDiff(forward(t, m, batch), forward(t, ref, batch)); d > 2e-2 {
					t.Errorf("merged logits differ from the FP32-base merge by %g", d)
				}
				must(t, m.Unmerge())
				must(t, ref.Unmerge())
				name := "bert.encoder.layer.0.attention.self.query.base_layer.weight"
				got, want := make([]float32, param(t, m, name).Value.Numel()), make([]float32, refByName[name].Numel())
				must(t, b.Download(got, param(t, m, name).Value))
				must(t, b.Download(want, refByName[name]))
				// Three roundings into the dtype (store, merge, unmerge), the last two of values up to |W|+|ΔW|:
				// two machine epsilons of max|W| (bf16 2^-7, fp16 2^-10).
				tol := 2.0 / 128
				if p == amp.FP16 {
					tol = 2.0 / 1024
				}
				if e := relErr(got, want); e > tol {
					t.Errorf("unmerged half base differs from the FP32 base by %g (relative), want ≤ %g", e, tol)
				}
				// Widening back: FP32 runs again, on the rounded values.
				must(t, m.StoreFrozenIn(tensor.F32))
				m.SetPolicy(amp.FP32)
				if _, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true}); err != nil {
					t.Errorf("FP32 Forward after StoreFrozenIn(F32): %v", err)
				}
				if v := param(t, m, name).Value; v.DType != tensor.F32 {
					t.Errorf("%s is %v after StoreFrozenIn(F32)", name, v.DType)
				}
			})
		}
	})
}

func must2(v, _ float64) float64 { return v }

// TestFrozenStoredInHalfDecoders: the same storage for the decoder families through the shared ModelCore —
// Llama (q_proj, v_proj adapted) and GPT-2 (c_attn adapted), BF16 and FP16: the frozen projections hold half
// the bytes and a training step's loss and gradients equal those of the FP32-master model bit for bit.
func TestFrozenStoredInHalfDecoders(t *testing.T) {
	b := cpuBackend()
	lcfg, err := llama.NewConfig("llama", 37, 16, 24, 2, 4, 2)
	must(t, err)
	gcfg := gpt2.DefaultConfig()
	gcfg.VocabSize, gcfg.NPositions, gcfg.NEmbd, gcfg.NLayer, gcfg.NHead = 37, 16, 16, 2, 2
	families := []struct {
		name  string
		build func() Base
	}{
		{"llama", func() Base {
			m, err := llama.New(b, lcfg, 3)
			must(t, err)
			return m
		}},
		{"gpt2", func() Base {
			m, err := gpt2.NewGPT2LMHeadModel(b, gcfg, 3)
			must(t, err)
			return m
		}},
	}
	batch := testBatch(2, 8, 37, []int{8, 5})
	batch.Labels = make([]int64, len(batch.InputIDs))
	for i, id := range batch.InputIDs {
		batch.Labels[i] = int64(id)
		if batch.AttentionMask[i] == 0 {
			batch.Labels[i] = -100
		}
	}
	for _, f := range families {
		for _, p := range []amp.Policy{amp.FP16, amp.BF16} {
			t.Run(f.name+"/"+p.String(), func(t *testing.T) {
				adapt := func() *Model {
					cfg := DefaultConfig()
					cfg.R, cfg.LoraAlpha, cfg.TaskType = 4, 8, "CAUSAL_LM"
					m, err := Apply(f.build(), cfg, 11)
					must(t, err)
					setParams(t, m, 5, func(name string) bool { return strings.Contains(name, ".lora_") })
					m.SetPolicy(p)
					return m
				}
				ref, m := adapt(), adapt()
				must(t, m.StoreFrozenIn(p.DType))
				bytesOf := func(m *Model) (all, half int) {
					for _, np := range m.NamedParameters() {
						all += np.Value.Bytes()
						if np.Value.DType == p.DType {
							half += np.Value.Numel()
							if np.Grad != nil {
								t.Errorf("%s is stored in %v and has a gradient", np.Name, p.DType)
							}
						}
					}
					return all, half
				}
				refAll, refHalf := bytesOf(ref)
				all, half := bytesOf(m)
				if refHalf != 0 || half == 0 || all != refAll-2*half {
					t.Errorf("bytes %d with %d half elements, want %d − 2·half (FP32 model)", all, half, refAll)
				}
				if lr, lm := step(t, ref, batch, 9), step(t, m, batch, 9); lr != lm {
					t.Errorf("loss %v, want %v", lm, lr)
				}
				_, gr, _ := ref.Trainable()
				_, gm, _ := m.Trainable()
				hr, hm := make([]float32, gr.Numel()), make([]float32, gm.Numel())
				must(t, b.Download(hr, gr))
				must(t, b.Download(hm, gm))
				if !slices.Equal(hr, hm) {
					t.Errorf("gradients differ: max |Δ| %g", must2(tensortest.MaxAbsDiff(hm, hr)))
				}
			})
		}
	}
}
