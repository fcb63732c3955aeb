package bench

import (
	"context"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer"
)

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy amp.Policy
		lora   bool
	}{
		{"fp32 full fine-tuning has no weight cache", amp.FP32, false},
		{"bf16 full fine-tuning", amp.BF16, false},
		{"bf16 LoRA: gradients and moments of the adapters and classifier only", amp.BF16, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := smallSpec(tc.policy, tc.lora)
			outer := NewMeter(cpu.New())
			plan, err := Plan(outer, s)
			if err != nil {
				t.Fatal(err)
			}
			if outer.Bytes() != 0 {
				t.Errorf("Plan left %d bytes allocated", outer.Bytes())
			}
			res, err := Run(context.Background(), cpu.New(), s)
			if err != nil {
				t.Fatal(err)
			}
			// Under autocast the frozen projections (weight and bias) are stored in half, each in a 16-byte aligned slot.
			var stored, slots int64
			if tc.policy.Enabled {
				_, m, err := buildModel(cpu.New(), &s)
				if err != nil {
					t.Fatal(err)
				}
				projs, err := Projections(m, 1, 1)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range projs {
					if !p.TrainWeight { // weight and bias, each 16-byte aligned in the Half buffer
						stored += int64(p.In*p.Out + p.Out)
						slots += int64(transformer.HalfSlot(p.In*p.Out) + transformer.HalfSlot(p.Out))
					}
				}
			}
			if tc.lora && stored == 0 {
				t.Error("LoRA under bf16 stores no frozen projection in half")
			}
			if plan.Parameters != 4*(res.Params-stored)+2*slots || plan.Gradients != 4*res.TrainableParams || plan.Optimizer != 8*res.TrainableParams {
				t.Errorf("plan %+v; want 4·(%d − %d) + 2·slots parameter bytes, 4·%d gradient bytes and 8·%d moment bytes", plan, res.Params, stored, res.TrainableParams, res.TrainableParams)
			}
			if (plan.WeightCache == 0) != !tc.policy.Enabled || plan.Activations <= 0 {
				t.Errorf("weight cache %d, activations %d", plan.WeightCache, plan.Activations)
			}
			// On the CPU nothing else goes through Alloc during a step: the measured peak is the plan.
			if res.PeakBytes != plan.Total() {
				t.Errorf("Run's peak %d bytes, the plan's total %d (%+v)", res.PeakBytes, plan.Total(), plan)
			}
		})
	}
	t.Run("activations grow with the batch", func(t *testing.T) {
		s := smallSpec(amp.BF16, false)
		one, err := Plan(cpu.New(), s)
		if err != nil {
			t.Fatal(err)
		}
		s.Batch *= 4
		four, err := Plan(cpu.New(), s)
		if err != nil {
			t.Fatal(err)
		}
		if four.Activations < 3*one.Activations || four.Parameters != one.Parameters {
			t.Errorf("batch 3: %+v; batch 12: %+v", one, four)
		}
	})
}

// TestPlanAllocatesNoArena: the plan of a batch far larger than the model computes the arena from its layout
// (the meter's peak stays below the planned activations), the default sdpa path holds no T×T buffer, and the
// eager path's T×T buffers are what its arena grows by.
func TestPlanAllocatesNoArena(t *testing.T) {
	s := smallSpec(amp.BF16, false)
	s.Batch, s.Seq = 64, 8 // T differs from the head size 16, whose (B, H, T, D) buffers would look T×T
	meter := NewMeter(cpu.New())
	sdpa, err := Plan(meter, s)
	if err != nil {
		t.Fatal(err)
	}
	if meter.Peak() >= sdpa.Activations {
		t.Errorf("Plan's peak allocation %d bytes reaches the planned activations %d: the arena was allocated", meter.Peak(), sdpa.Activations)
	}
	if sdpa.Attention != "sdpa" || sdpa.Quadratic != 0 {
		t.Errorf("sdpa plan: attention %q, %d bytes of T×T buffers", sdpa.Attention, sdpa.Quadratic)
	}
	s.AttnImplementation = "eager"
	eager, err := Plan(cpu.New(), s)
	if err != nil {
		t.Fatal(err)
	}
	// per layer the eager path keeps probs (F32) and dropout(probs) (BF16), and shares scores and their
	// gradient (F32, BF16) and dProbs (F32): (4+2)·L + 4+2+4 bytes per (B, H, T, T) element.
	l, h := int64(s.Config.NumHiddenLayers), int64(s.Config.NumAttentionHeads)
	want := (6*l + 10) * int64(s.Batch) * h * int64(s.Seq*s.Seq)
	if eager.Attention != "eager" || eager.Quadratic != want {
		t.Errorf("eager plan: attention %q, %d bytes of T×T buffers, want %d", eager.Attention, eager.Quadratic, want)
	}
	if eager.Activations <= sdpa.Activations {
		t.Errorf("eager activations %d ≤ sdpa's %d", eager.Activations, sdpa.Activations)
	}
}

// TestPlanGradientCheckpointing: with GradientCheckpointing the plan's activation arena is smaller (one
// layer's internal activations instead of every layer's; weights, gradients and AdamW state unchanged), a
// timed run allocates exactly that plan on the CPU, and on the eager path only one layer's T×T buffers count.
func TestPlanGradientCheckpointing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy amp.Policy
		lora   bool
		attn   string
	}{
		{"fp32", amp.FP32, false, "sdpa"},
		{"bf16", amp.BF16, false, "sdpa"},
		{"bf16 LoRA", amp.BF16, true, "sdpa"},
		{"bf16 eager", amp.BF16, false, "eager"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := smallSpec(tc.policy, tc.lora)
			s.AttnImplementation = tc.attn
			plain, err := Plan(cpu.New(), s)
			if err != nil {
				t.Fatal(err)
			}
			s.GradientCheckpointing = true
			ck, err := Plan(cpu.New(), s)
			if err != nil {
				t.Fatal(err)
			}
			if ck.Activations >= plain.Activations || ck.Parameters != plain.Parameters || ck.Optimizer != plain.Optimizer {
				t.Errorf("with gradient checkpointing %+v; without %+v", ck, plain)
			}
			if tc.attn == "eager" && (ck.Quadratic == 0 || ck.Quadratic >= plain.Quadratic || ck.Quadratic > ck.Activations) {
				t.Errorf("eager T×T bytes: %d with checkpointing (activations %d), %d without", ck.Quadratic, ck.Activations, plain.Quadratic)
			}
			res, err := Run(context.Background(), cpu.New(), s)
			if err != nil {
				t.Fatal(err)
			}
			if res.PeakBytes != ck.Total() {
				t.Errorf("Run's peak %d bytes with checkpointing, the plan's total %d", res.PeakBytes, ck.Total())
			}
			t.Logf("activations %d → %d bytes", plain.Activations, ck.Activations)
		})
	}
}
