package bert

import (
	"bytes"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/transformertest"
)

// TestSDPAMatchesEager trains one step of the same model with attn_implementation "sdpa" (the fused op, the
// default) and "eager" (the two-pass path), with attention and hidden dropout on and a padded batch, and
// requires the same loss, logits and gradients: to FP32 rounding in FP32 (the dropout masks are the same
// Philox elements), and within the half dtype's rounding of P' and dS under BF16/FP16 autocast.
func TestSDPAMatchesEager(t *testing.T) {
	b := cpuBackend()
	cfg := tinyConfig()
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0.1, 0.2
	batch := testBatch(3, 7, cfg.VocabSize, 3, []int{7, 4, 2})
	for _, c := range []struct {
		mode string
		pol  amp.Policy
		tol  float64
	}{{"fp32", amp.FP32, 2e-5}, {"bf16", amp.BF16, 2e-2}, {"fp16", amp.FP16, 3e-3}} {
		t.Run(c.mode, func(t *testing.T) {
			var outs []transformer.Output
			var grads [][][]float32
			var names []string
			for _, impl := range []string{transformer.AttnSDPA, transformer.AttnEager} {
				m := newTestModel(t, b, cfg, 3)
				if err := m.SetAttnImplementation(impl); err != nil {
					t.Fatal(err)
				}
				m.SetPolicy(c.pol)
				outs = append(outs, transformertest.Step(t, m, batch, 99))
				if m.shape.impl != impl {
					t.Fatalf("asked for %s, ran %s", impl, m.shape.impl)
				}
				n, g := modelGrads(t, m)
				names, grads = n, append(grads, g)
			}
			if e := math.Abs(float64(outs[0].Loss-outs[1].Loss)) / math.Abs(float64(outs[1].Loss)); e > c.tol {
				t.Errorf("loss: sdpa %v, eager %v (relative error %.3g)", outs[0].Loss, outs[1].Loss, e)
			}
			if e, i := tensortest.RelErr(outs[0].Logits, outs[1].Logits); e > c.tol {
				t.Errorf("logits: relative error %.3g at %d", e, i)
			}
			errs, worst := gradErrors(names, grads[0], grads[1])
			for i, e := range errs {
				if e > c.tol {
					t.Errorf("%s: sdpa vs eager gradient error %.3g > %g", names[i], e, c.tol)
				}
			}
			t.Logf("worst gradient %s: %.3g; loss %v vs %v", names[worst], errs[worst], outs[0].Loss, outs[1].Loss)
		})
	}
}

// opCounter counts the Backend calls the model makes.
type opCounter struct {
	tensor.Backend
	transposes, fused int
}

func (o *opCounter) Transpose12(out, x *tensor.Tensor, a, b, c, d int) error {
	o.transposes++
	return o.Backend.Transpose12(out, x, a, b, c, d)
}

func (o *opCounter) Attention(a tensor.AttentionArgs) error {
	o.fused++
	return o.Backend.Attention(a)
}

func (o *opCounter) AttentionBackward(a tensor.AttentionBackwardArgs) error {
	o.fused++
	return o.Backend.AttentionBackward(a)
}

// TestSDPAPathHasNoPermutes requires the default path to run no Transpose12 and one fused forward and backward
// per layer, for the plain model and with a wrapper (as LoRA's) in place of the value projections (the
// projections then write their own (B, T, C) buffers), and the eager path to keep using the two-pass ops.
func TestSDPAPathHasNoPermutes(t *testing.T) {
	cfg := tinyConfig()
	batch := testBatch(2, 5, cfg.VocabSize, 3, []int{5, 3})
	for _, c := range []struct {
		name    string
		impl    string
		lora    bool
		permute bool
	}{{"sdpa", "", false, false}, {"sdpa with a wrapped value projection", "", true, false}, {"eager", transformer.AttnEager, false, true}} {
		t.Run(c.name, func(t *testing.T) {
			ops := &opCounter{Backend: cpuBackend()}
			m := newTestModel(t, ops, cfg, 5)
			if err := m.SetAttnImplementation(c.impl); err != nil {
				t.Fatal(err)
			}
			var model transformer.Model = m
			if c.lora { // a wrapper from outside the package in place of every value projection, as LoRA's
				repl := map[string]transformer.Projection{}
				for _, mp := range m.Projections() {
					if strings.HasSuffix(mp.Path, ".value") {
						extra, err := ops.Alloc(tensor.F32, 2)
						if err != nil {
							t.Fatal(err)
						}
						repl[mp.Path] = &scaledProjection{base: mp.Projection.Base(), s: 1, extra: &transformer.Param{Value: extra, Trainable: true}}
					}
				}
				if err := m.ReplaceProjections(repl); err != nil {
					t.Fatal(err)
				}
			}
			for run := 0; run < 2; run++ { // the first step also probes the backend's fused op
				ops.transposes, ops.fused = 0, 0
				if err := model.ZeroGrad(); err != nil {
					t.Fatal(err)
				}
				if _, err := model.Forward(batch, transformer.ForwardOptions{Train: true, Seed: 1}); err != nil {
					t.Fatal(err)
				}
				if err := model.Backward(1); err != nil {
					t.Fatal(err)
				}
			}
			if c.permute {
				if ops.transposes == 0 || ops.fused != 0 {
					t.Fatalf("eager: %d Transpose12 and %d fused calls, want some and none", ops.transposes, ops.fused)
				}
				return
			}
			if ops.transposes != 0 || ops.fused != 2*cfg.NumHiddenLayers {
				t.Fatalf("%d Transpose12 and %d fused attention calls, want 0 and %d", ops.transposes, ops.fused, 2*cfg.NumHiddenLayers)
			}
		})
	}
}

// TestAttnImplementationChoice checks the setting's names and the fallback: an unknown name is an error naming
// the accepted ones, and a backend whose fused op answers ErrUnsupported gets the eager path with the reason.
func TestAttnImplementationChoice(t *testing.T) {
	m := newTestModel(t, cpuBackend(), tinyConfig(), 1)
	if err := m.SetAttnImplementation("flash_attention_2"); err == nil || !strings.Contains(err.Error(), `"sdpa"`) {
		t.Fatalf("SetAttnImplementation(flash_attention_2) = %v, want an error naming sdpa and eager", err)
	}
	if got := m.AttnImplementation(); got != transformer.AttnSDPA {
		t.Fatalf("default attn_implementation %q, want sdpa", got)
	}
	ref := newTestModel(t, cpuBackend(), tinyConfig(), 1)
	if err := ref.SetAttnImplementation(transformer.AttnEager); err != nil {
		t.Fatal(err)
	}
	batch := testBatch(2, 5, 50, 3, []int{5, 3})
	want := transformertest.Step(t, ref, batch, 0)
	fb := newTestModel(t, refusing{cpuBackend()}, tinyConfig(), 1)
	var log bytes.Buffer
	fb.SetLogger(slog.New(slog.NewTextHandler(&log, nil)))
	got := transformertest.Step(t, fb, batch, 0)
	transformertest.Step(t, fb, testBatch(2, 3, 50, 3, []int{3, 2}), 0)
	if n := strings.Count(log.String(), "using attn_implementation"); n != 1 {
		t.Fatalf("the fallback was logged %d times, want once:\n%s", n, log.String())
	}
	if fb.AttnFallback() == "" || !strings.Contains(fb.AttnFallback(), "head size") {
		t.Fatalf("AttnFallback() = %q, want the backend's reason", fb.AttnFallback())
	}
	if got.Loss != want.Loss {
		t.Fatalf("fallback loss %v, eager loss %v: the fallback must be the eager path", got.Loss, want.Loss)
	}
}

// refusing is a backend whose fused attention covers nothing, as a GPU kernel refuses a head size.
type refusing struct{ tensor.Backend }

func (refusing) Attention(a tensor.AttentionArgs) error {
	return tensor.Errorf("Attention", unsupported(a.D))
}

func (refusing) AttentionBackward(a tensor.AttentionBackwardArgs) error {
	return tensor.Errorf("AttentionBackward", unsupported(a.D))
}

func unsupported(d int) error {
	return &wrapped{msg: "head size " + string(rune('0'+d%10)) + " is not covered (want 64 or 128)"}
}

type wrapped struct{ msg string }

func (w *wrapped) Error() string { return w.msg + ": " + tensor.ErrUnsupported.Error() }
func (w *wrapped) Unwrap() error { return tensor.ErrUnsupported }

// TestLoadAttnImplementation: LoadOptions.AttnImplementation reaches the loaded model, and an unknown name is
// refused before anything loads.
func TestLoadAttnImplementation(t *testing.T) {
	dir := testutil.SharedData(t, "tiny-bert-random")
	m, _, err := LoadPretrained(dir, cpuBackend(), transformer.LoadOptions{AttnImplementation: transformer.AttnEager})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.AttnImplementation(); got != transformer.AttnEager {
		t.Fatalf("loaded with eager, the model runs %q", got)
	}
	if _, _, err := LoadPretrained(dir, cpuBackend(), transformer.LoadOptions{AttnImplementation: "flash"}); err == nil ||
		!strings.Contains(err.Error(), `attn_implementation "flash" is not supported`) {
		t.Fatalf("an unknown attn_implementation: %v", err)
	}
}
