package bench

import (
	"context"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor/cpu"
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
			if plan.Parameters != 4*res.Params || plan.Gradients != 4*res.TrainableParams || plan.Optimizer != 8*res.TrainableParams {
				t.Errorf("plan %+v; want 4·%d parameter bytes, 4·%d gradient bytes and 8·%d moment bytes", plan, res.Params, res.TrainableParams, res.TrainableParams)
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
