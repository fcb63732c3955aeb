package gpt2

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
)

// goldenScript makes every file these tests read.
const goldenScript = "python3 tools/reference/gpt2_goldens.py testdata/gpt2 (on the GPU machine: torch + transformers + peft)"

// goldenDir returns testdata/gpt2/rel, skipping the test when the goldens have not been generated.
func goldenDir(t *testing.T, rel string) string {
	t.Helper()
	p := testutil.Testdata(t, "gpt2", rel)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		t.Skipf("golden %s not generated yet: run %s", p, goldenScript)
	}
	return p
}

// goldens opens testdata/gpt2/gpt2_goldens.safetensors.
func goldens(t *testing.T) *loaders.Checkpoint {
	t.Helper()
	ck, err := loaders.OpenCheckpoint(goldenDir(t, "gpt2_goldens.safetensors"))
	if err != nil {
		t.Fatalf("%v (regenerate with %s)", err, goldenScript)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

func goldenF32(t *testing.T, ck *loaders.Checkpoint, name string) []float32 {
	t.Helper()
	ht, err := ck.Get(name)
	if err != nil {
		t.Fatalf("golden %s: %v (regenerate with %s)", name, err, goldenScript)
	}
	v, err := ht.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// goldenBatch rebuilds the inputs the script fed transformers.
func goldenBatch(t *testing.T, ck *loaders.Checkpoint) *loaders.Batch {
	t.Helper()
	get := func(name string) (*loaders.HostTensor, []int64) {
		ht, err := ck.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		v, err := ht.Int64()
		if err != nil {
			t.Fatal(err)
		}
		return &ht, v
	}
	ht, ids := get("inputs/input_ids")
	_, mask := get("inputs/attention_mask")
	_, labels := get("inputs/labels")
	toI32 := func(v []int64) []int32 {
		out := make([]int32, len(v))
		for i, x := range v {
			out[i] = int32(x)
		}
		return out
	}
	return &loaders.Batch{B: ht.Shape[0], T: ht.Shape[1], InputIDs: toI32(ids), AttentionMask: toI32(mask), Labels: labels}
}

var goldenPolicies = map[string]amp.Policy{"fp32": amp.FP32, "bf16": amp.BF16, "fp16": amp.FP16}

// goldenTolerance is the bound: 1e-5 relative in FP32; under autocast the BERT goldens' 1e-2.
func goldenTolerance(mode string) float64 {
	if mode == "fp32" {
		return 1e-5
	}
	return 1e-2
}

// skipUnsupported skips when the backend has no fused-attention kernel for the tiny model's head size (8).
func skipUnsupported(t *testing.T, b tensor.Backend, err error) {
	t.Helper()
	if errors.Is(err, tensor.ErrUnsupported) {
		t.Skipf("%s has no fused-attention kernel for this shape: %v", b.Name(), err)
	}
}

// TestGoldenTinyGPT2 loads transformers' tiny GPT-2 checkpoints (tied and untied) and compares logits, loss
// and every parameter gradient with transformers' in FP32 (≤ 1e-5 relative per tensor) and under BF16 and
// FP16 autocast.
func TestGoldenTinyGPT2(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		ck := goldens(t)
		batch := goldenBatch(t, ck)
		for _, variant := range []string{"tied", "untied"} {
			dir := "tiny"
			if variant == "untied" {
				dir = "tiny_untied"
			}
			t.Run(variant, func(t *testing.T) {
				m, _, err := LoadPretrained(goldenDir(t, dir), b, transformer.LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, mode := range []string{"fp32", "bf16", "fp16"} {
					t.Run(mode, func(t *testing.T) {
						m.SetPolicy(goldenPolicies[mode])
						if err := m.ZeroGrad(); err != nil {
							t.Fatal(err)
						}
						out, err := m.Forward(batch, transformer.ForwardOptions{Train: true, HostLogits: true})
						skipUnsupported(t, b, err)
						if err != nil {
							t.Fatal(err)
						}
						if err := m.Backward(1); err != nil {
							t.Fatal(err)
						}
						tol := goldenTolerance(mode)
						pre := mode + "/" + variant + "/"
						if e, i := tensortest.RelErr(out.Logits, goldenF32(t, ck, pre+"logits")); e > tol {
							t.Errorf("logits: relative error %.3g > %.0e at %d", e, tol, i)
						} else {
							t.Logf("logits: relative error %.3g", e)
						}
						want := goldenF32(t, ck, pre+"loss")[0]
						if e := math.Abs(float64(out.Loss-want)) / math.Abs(float64(want)); e > tol {
							t.Errorf("loss %v, transformers %v (relative error %.3g)", out.Loss, want, e)
						}
						worst := 0.0
						for _, np := range m.namedParameters() {
							g := tensortest.Download(t, b, np.Param.Grad)
							if isConv(np.Name) { // transformers' Conv1D gradient is (in, out)
								g = transposed(g, np.Param.Value.Shape[0], np.Param.Value.Shape[1])
							}
							e, i := tensortest.RelErr(g, goldenF32(t, ck, pre+"grad/"+np.Name))
							if e > tol {
								t.Errorf("grad %s: relative error %.3g > %.0e at %d", np.Name, e, tol, i)
							}
							worst = max(worst, e)
						}
						t.Logf("gradients: worst relative error %.3g over %d tensors", worst, len(m.namedParameters()))
					})
				}
			})
		}
	})
}

// TestGoldenGPT2ModelLayout: the old GPT2Model checkpoint (no prefix, attn.bias/masked_bias buffers) gives
// transformers' FP32 logits too.
func TestGoldenGPT2ModelLayout(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		ck := goldens(t)
		m, report, err := LoadPretrained(goldenDir(t, "tiny_gpt2model"), b, transformer.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(report.Ignored) != 4 {
			t.Errorf("ignored %v, want the 2·2 attention buffers", report.Ignored)
		}
		out, err := m.Forward(goldenBatch(t, ck), transformer.ForwardOptions{HostLogits: true})
		skipUnsupported(t, b, err)
		if err != nil {
			t.Fatal(err)
		}
		if e, i := tensortest.RelErr(out.Logits, goldenF32(t, ck, "fp32/tied/logits")); e > 1e-5 {
			t.Errorf("logits: relative error %.3g at %d", e, i)
		}
	})
}

// TestGoldenPEFT: PEFT's c_attn adapter (fan_in_fan_out) on the tiny GPT-2 gives PEFT's logits in tune. With
// GPT2_TUNE_OUT=DIR set, it also writes DIR/adapter (an adapter tune trained one step, non-zero B) and
// DIR/logits.safetensors (inputs and tune's logits with it) for gpt2_goldens.py --check-tune, which loads the
// adapter with PeftModel.from_pretrained.
func TestGoldenPEFT(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		ck := goldens(t)
		batch := goldenBatch(t, ck)
		base, _, err := LoadPretrained(goldenDir(t, "tiny"), b, transformer.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := lora.LoadAdapter(base, goldenDir(t, "peft_adapter"))
		if err != nil {
			t.Fatal(err)
		}
		out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
		skipUnsupported(t, b, err)
		if err != nil {
			t.Fatal(err)
		}
		if e, i := tensortest.RelErr(out.Logits, goldenF32(t, ck, "peft/logits")); e > 1e-5 {
			t.Errorf("logits with PEFT's adapter: relative error %.3g at %d", e, i)
		} else {
			t.Logf("logits with PEFT's adapter: relative error %.3g", e)
		}
		dir := os.Getenv("GPT2_TUNE_OUT")
		if dir == "" || b.Name() != "cpu" {
			return
		}
		// An adapter tune writes: one training step from PEFT's, so every B is non-zero and different.
		if _, err := m.Forward(batch, transformer.ForwardOptions{Train: true}); err != nil {
			t.Fatal(err)
		}
		if err := m.Backward(1); err != nil {
			t.Fatal(err)
		}
		params, grads, segs := m.Trainable()
		opt := tensor.AdamWArgs{Params: params, Grads: grads, Segments: segs, LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1}
		opt.ExpAvg, opt.ExpAvgSq = tensortest.Alloc(t, b, tensor.F32, params.Numel()), tensortest.Alloc(t, b, tensor.F32, params.Numel())
		if err := b.AdamW(opt); err != nil {
			t.Fatal(err)
		}
		base.WeightsUpdated()
		if err := m.Save(filepath.Join(dir, "adapter")); err != nil {
			t.Fatal(err)
		}
		out, err = m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		ids, mask := make([]int64, len(batch.InputIDs)), make([]int64, len(batch.AttentionMask))
		for i := range ids {
			ids[i], mask[i] = int64(batch.InputIDs[i]), int64(batch.AttentionMask[i])
		}
		shape := []int{batch.B, batch.T}
		hi, _ := loaders.NewHostTensorInt64("input_ids", shape, ids)
		hm, _ := loaders.NewHostTensorInt64("attention_mask", shape, mask)
		hl, err := loaders.NewHostTensor("logits", tensor.F32, []int{batch.B, batch.T, out.NumLabels}, out.Logits)
		if err != nil {
			t.Fatal(err)
		}
		if err := loaders.WriteSafetensors(filepath.Join(dir, "logits.safetensors"), []loaders.HostTensor{hi, hm, hl}, nil); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote tune's adapter and logits into %s for gpt2_goldens.py --check-tune", dir)
	})
}

// transposed returns the (cols, rows) transpose of a row-major (rows, cols) matrix.
func transposed(v []float32, rows, cols int) []float32 {
	out := make([]float32, len(v))
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			out[j*rows+i] = v[i*cols+j]
		}
	}
	return out
}
