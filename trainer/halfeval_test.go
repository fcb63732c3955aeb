package trainer

import (
	"context"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// policyModel is a bagModel that records the policy of every Forward.
type policyModel struct {
	*bagModel
	seen []amp.Policy
}

func (m *policyModel) Forward(b *loaders.Batch, opts ForwardOptions) (Output, error) {
	m.seen = append(m.seen, m.policy)
	return m.bagModel.Forward(b, opts)
}

// TestFullEvalWithoutHalfInference checks fp16_full_eval / bf16_full_eval on a model without HalfInference:
// evaluation runs under autocast in that dtype, as documented, without a warning, and the training policy is
// restored afterwards.
func TestFullEvalWithoutHalfInference(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(a *TrainingArguments)
		want amp.Policy
	}{
		{"fp16_full_eval", func(a *TrainingArguments) { a.FP16FullEval = true }, amp.Policy{Enabled: true, DType: tensor.F16}},
		{"bf16_full_eval", func(a *TrainingArguments) { a.BF16FullEval = true }, amp.Policy{Enabled: true, DType: tensor.BF16}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testArgs(t)
			tc.set(&a)
			m := &policyModel{bagModel: newBagModel(16, 8, 2, 0)}
			tr, _, logs := newTestTrainer(t, m, a, nil, toyTask(12, 16, 2))
			if _, err := tr.Evaluate(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(m.seen) == 0 {
				t.Fatal("no Forward")
			}
			for i, p := range m.seen {
				if p != tc.want {
					t.Errorf("forward %d ran under %+v, want %+v", i, p, tc.want)
				}
			}
			if m.policy.Enabled {
				t.Errorf("the policy after evaluation is %+v, want the FP32 training policy back", m.policy)
			}
			if s := logs.String(); s != "" {
				t.Errorf("evaluation logged %q; autocast is the documented behaviour, not a fallback to warn about", s)
			}
		})
	}
}

// TestEvalBatchSizeAboveDatasetSize checks that a per_device_eval_batch_size far larger than the evaluation set
// (a typo such as 1000000000) evaluates the set in one batch instead of allocating for the batch size: it used
// to end tune finetune with "fatal error: out of memory".
func TestEvalBatchSizeAboveDatasetSize(t *testing.T) {
	a := testArgs(t)
	a.PerDeviceEvalBatchSize = 1 << 62
	m := &policyModel{bagModel: newBagModel(16, 8, 2, 0)}
	tr, _, _ := newTestTrainer(t, m, a, nil, toyTask(12, 16, 2))
	metrics, err := tr.Evaluate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.seen) != 1 {
		t.Errorf("%d forwards, want the 12 examples in one batch", len(m.seen))
	}
	if _, ok := metrics["eval_loss"]; !ok {
		t.Errorf("no eval_loss in %v", metrics)
	}
}
