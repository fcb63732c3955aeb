package bench

import (
	"context"
	"github.com/tune-ml/tune/transformer/bert"
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// smallConfig is a BERT small enough for a unit test: V 100, C 32, 2 layers of 2 heads, I 64, 2 labels,
// dropout 0.1.
func smallConfig() bert.BertConfig {
	c := bert.DefaultBertConfig()
	c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 100, 32, 2, 2, 64
	c.MaxPositionEmbeddings = 16
	return c
}

func smallSpec(p amp.Policy, withLoRA bool) Spec {
	s := DefaultSpec()
	s.Model, s.Config, s.Batch, s.Seq, s.Policy, s.Warmup, s.Steps = "small-test", smallConfig(), 3, 8, p, 1, 3
	if withLoRA {
		c := LoRAConfig(4, []string{"query", "value"})
		s.LoRA = &c
	}
	return s
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   amp.Policy
		lora     bool
		syncFree bool    // not TUNE_SYNC_FREE=0
		waits    float64 // host waits per step
	}{
		{"fp32 full fine-tuning", amp.FP32, false, true, 0},
		{"bf16 full fine-tuning", amp.BF16, false, true, 0},
		{"fp16 full fine-tuning with the GradScaler on the device", amp.FP16, false, true, 0},
		{"bf16 LoRA trains the adapters and the classifier only", amp.BF16, true, true, 0},
		{"bf16 reading the loss and the norm on the host", amp.BF16, false, false, 2},
		{"fp16 reading the loss, norm and found-inf on the host", amp.FP16, false, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.syncFree {
				t.Setenv("TUNE_SYNC_FREE", "1")
			} else {
				t.Setenv("TUNE_SYNC_FREE", "0")
			}
			outer := NewMeter(cpu.New()) // sees what Run allocates and frees
			s := smallSpec(tc.policy, tc.lora)
			res, err := Run(context.Background(), outer, s)
			if err != nil {
				t.Fatal(err)
			}
			if got := outer.Bytes(); got != 0 {
				t.Errorf("Run left %d bytes allocated on the backend, want 0", got)
			}
			if len(res.StepMS) != s.Steps || !(res.MedianMS > 0) || res.P10MS > res.MedianMS || res.MedianMS > res.P90MS {
				t.Errorf("steps %v, median %v, p10 %v, p90 %v: want %d positive ordered timings", res.StepMS, res.MedianMS, res.P10MS, res.P90MS, s.Steps)
			}
			if res.Mode != tc.policy.Precision() || res.LoRA != tc.lora || res.Batch != 3 || res.Seq != 8 || res.Impl != ImplTune {
				t.Errorf("result describes %q, want mode %s, LoRA %v, 3×8, impl tune", res.Key(), tc.policy.Precision(), tc.lora)
			}
			if math.IsNaN(res.LossFirst) || math.IsInf(res.LossLast, 0) || res.LossFirst <= 0 {
				t.Errorf("loss first %v last %v: want finite positive cross-entropy", res.LossFirst, res.LossLast)
			}
			// Parameters, their gradients and both AdamW moments live for the whole run: at least 4 bytes for
			// each parameter and 12 more for each trained one.
			floor := 4*res.Params + 12*res.TrainableParams
			if res.PeakBytes < floor || res.PeakBytes > outer.Peak() {
				t.Errorf("peak %d bytes: want between %d (params, grads, moments) and the outer meter's %d", res.PeakBytes, floor, outer.Peak())
			}
			if tc.lora != (res.TrainableParams < res.Params/10) {
				t.Errorf("%d of %d parameters trained (LoRA %v)", res.TrainableParams, res.Params, tc.lora)
			}
			want := res.FLOPsPerStep / (res.MedianMS / 1e3) / 1e12
			if math.Abs(res.TFLOPS-want) > 1e-9*want || math.Abs(res.TokensPerS-24/(res.MedianMS/1e3)) > 1e-6*res.TokensPerS {
				t.Errorf("TFLOP/s %v tokens/s %v do not follow from %v FLOPs, 24 tokens and %v ms", res.TFLOPS, res.TokensPerS, res.FLOPsPerStep, res.MedianMS)
			}
			if res.HostWaitsPerStep != tc.waits {
				t.Errorf("%v host waits per step (%v), want %v", res.HostWaitsPerStep, res.HostWaits, tc.waits)
			}
			if res.Timing != "wall clock" || !strings.Contains(res.Memory, "Alloc minus Free") {
				t.Errorf("timing %q memory %q: want the CPU's wall clock and the meter's count", res.Timing, res.Memory)
			}
		})
	}
}

// TestProfileMatchesFLOPCount checks the FLOP formula against the GEMMs the step really issues: the profiled
// step's summed 2·M·N·K·batch over every Gemm call, plus the fused attention's counted products, must equal
// CountFLOPs exactly, for full and LoRA training.
func TestProfileMatchesFLOPCount(t *testing.T) {
	t.Setenv("TUNE_SYNC_FREE", "1") // the device-side norm and clip
	for _, tc := range []struct {
		name string
		lora bool
	}{
		{"full fine-tuning issues every dW GEMM", false},
		{"LoRA skips the frozen weights' dW GEMMs", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := smallSpec(amp.BF16, tc.lora)
			s.Steps, s.Profile = 1, 2
			res, err := Run(context.Background(), cpu.New(), s)
			if err != nil {
				t.Fatal(err)
			}
			bd := res.Breakdown
			if bd == nil || bd.Steps != 2 || len(bd.Ops) == 0 || len(bd.Gemms) == 0 {
				t.Fatalf("breakdown %+v: want 2 profiled steps with ops and GEMM shapes", bd)
			}
			gemm := 0.0
			ops := map[string]bool{}
			for _, o := range bd.Ops {
				gemm += o.FLOPs
				ops[o.Op] = true
				if o.Calls <= 0 || o.MS < 0 {
					t.Errorf("%s: %d calls, %v ms", o.Op, o.Calls, o.MS)
				}
			}
			if got := gemm / 2; got != res.FLOPsPerStep {
				t.Errorf("profiled GEMMs do %v FLOPs per step, CountFLOPs says %v", got, res.FLOPsPerStep)
			}
			for _, op := range []string{"Gemm forward (bf16)", "Gemm input-grad (bf16)", "Gemm weight-grad (bf16)", "Attention", "AttentionBackward", "AdamW", "GlobalNormTo", "LayerNorm"} { // the default sdpa path: no attention GEMMs or Softmax
				if !ops[op] {
					t.Errorf("breakdown lacks %q; has %v", op, ops)
				}
			}
		})
	}
}

func TestRunRejectsBadSpecs(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(*Spec)
	}{
		{"no timed steps", "steps 0", func(s *Spec) { s.Steps = 0 }},
		{"sequence longer than the positions", "seq 17", func(s *Spec) { s.Seq = 17 }},
		{"empty batch", "batch 0", func(s *Spec) { s.Batch = 0 }},
		{"zero learning rate", "learning rate 0", func(s *Spec) { s.LearningRate = 0 }},
		{"LoRA rank 0", "r", func(s *Spec) { s.LoRA.R = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := smallSpec(amp.FP32, true)
			tc.edit(&s)
			_, err := Run(context.Background(), cpu.New(), s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestRunHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, cpu.New(), smallSpec(amp.FP32, false))
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("err %v, want an interruption", err)
	}
}

// TestDeviceStepIsHostStep: the step without host waits (loss, gradient norm, clip and skip on the device)
// trains bit for bit as the step that reads the loss and the norm on the host, full and LoRA, in BF16 and FP32,
// and in FP16 (the GradScaler on the device: found-inf flag, skip, scale update, AdamW's step from a table).
func TestDeviceStepIsHostStep(t *testing.T) {
	t.Setenv("TUNE_SYNC_FREE", "1")
	tensortest.ForEachBackend(t, deviceStepIsHostStep)
}

func deviceStepIsHostStep(t *testing.T, b tensor.Backend) {
	for _, tc := range []struct {
		policy amp.Policy
		lora   bool
	}{{amp.BF16, false}, {amp.FP32, false}, {amp.BF16, true}, {amp.FP16, false}, {amp.FP16, true}} {
		t.Run(tc.policy.Precision()+map[bool]string{true: " LoRA", false: " full"}[tc.lora], func(t *testing.T) {
			s := smallSpec(tc.policy, tc.lora)
			s.MaxGradNorm = 0.05 // clipping acts on every step
			run := func(device bool) ([]float32, []float32) {
				meter := NewMeter(b)
				defer meter.freeAll()
				st, err := build(meter, &s)
				if err != nil {
					t.Fatal(err)
				}
				if !device {
					st.norm, st.nonFinite, st.dev = nil, nil, nil
				} else if (st.dev != nil) != (tc.policy.DType == tensor.F16) {
					t.Fatalf("device scaler %v under %s", st.dev != nil, tc.policy.Precision())
				}
				var losses []float32
				for range 3 {
					if err := st.step(); err != nil {
						t.Fatal(err)
					}
					l, err := st.loss()
					if err != nil {
						t.Fatal(err)
					}
					losses = append(losses, l)
				}
				p, _, _ := st.m.Trainable()
				return losses, tensortest.Download(t, meter, p)
			}
			hl, hp := run(false)
			dl, dp := run(true)
			for i := range hl {
				if math.Float32bits(hl[i]) != math.Float32bits(dl[i]) {
					t.Errorf("step %d loss %v on the device, %v on the host", i+1, dl[i], hl[i])
				}
			}
			for i := range hp {
				if math.Float32bits(hp[i]) != math.Float32bits(dp[i]) {
					t.Fatalf("trainable value %d = %v after device steps, %v after host steps", i, dp[i], hp[i])
				}
			}
		})
	}
}
