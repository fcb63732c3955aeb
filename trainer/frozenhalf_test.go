package trainer

import (
	"testing"

	"github.com/tune-ml/tune/amp"
)

// TestStoreFrozenHalf: frozen weights go to half under FP16/BF16 autocast, not under FP32, and not when
// fp16_full_eval/bf16_full_eval asks for evaluation in the other half dtype.
func TestStoreFrozenHalf(t *testing.T) {
	for _, tc := range []struct {
		policy     amp.Policy
		fp16, bf16 bool
		want       bool
	}{
		{amp.FP32, false, false, false},
		{amp.BF16, false, false, true},
		{amp.FP16, false, false, true},
		{amp.BF16, false, true, true},
		{amp.FP16, true, false, true},
		{amp.BF16, true, false, false},
		{amp.FP16, false, true, false},
	} {
		a := TrainingArguments{FP16FullEval: tc.fp16, BF16FullEval: tc.bf16}
		if got := storeFrozenHalf(a, tc.policy); got != tc.want {
			t.Errorf("%s with fp16_full_eval %v, bf16_full_eval %v: %v, want %v", tc.policy, tc.fp16, tc.bf16, got, tc.want)
		}
	}
}
