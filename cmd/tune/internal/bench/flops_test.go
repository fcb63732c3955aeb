package bench

import (
	"github.com/tune-ml/tune/transformer/bert"
	"math"
	"testing"

	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/tensor/cpu"
)

// closedForm is the package documentation's formula for BERT: full fine-tuning, or LoRA rank r on query and
// value with the classifier trained.
func closedForm(cfg bert.BertConfig, b, t, r int) float64 {
	B, T, L := float64(b), float64(t), float64(cfg.NumHiddenLayers)
	C, I, K := float64(cfg.HiddenSize), float64(cfg.IntermediateSize), float64(cfg.NumLabels())
	dense := B * T * L * (4*C*C + 2*C*I)
	attn := 12 * B * L * T * T * C
	if r == 0 {
		return 6*dense + 6*B*(C*C+C*K) + attn
	}
	// the first layer's query, key and value form no input gradient over the frozen embeddings
	return 4*dense + 4*B*C*C + 6*B*C*K + attn + 24*B*T*L*float64(r)*C - 6*B*T*C*C - 4*B*T*float64(r)*C
}

func TestCountFLOPsMatchesClosedForm(t *testing.T) {
	cfg := smallConfig()
	for _, tc := range []struct {
		name string
		r    int
	}{
		{"full fine-tuning: 6 FLOPs per token per weight plus attention", 0},
		{"LoRA r=4 on query and value: no dW for frozen weights", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := bert.NewBertForSequenceClassification(cpu.New(), cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			var base lora.Base = m
			if tc.r > 0 {
				lm, err := lora.Apply(m, LoRAConfig(tc.r, []string{"query", "value"}), 1)
				if err != nil {
					t.Fatal(err)
				}
				base = lm
			}
			f, err := CountFLOPs(base, cfg, 3, 5)
			if err != nil {
				t.Fatal(err)
			}
			if want := closedForm(cfg, 3, 5, tc.r); f.Total() != want {
				t.Errorf("CountFLOPs = %v, closed form %v", f.Total(), want)
			}
			attnFwd := 4.0 * 3 * 2 * 5 * 5 * 32
			var skipped float64 // LoRA: the first layer's q, k, v dense dX and the two adapters' dH·A
			if tc.r > 0 {
				skipped = 6*15*32*32 + 4*15*float64(tc.r)*32
			}
			if f.BackwardData != f.Forward+attnFwd-skipped {
				t.Errorf("input gradients %v, want forward %v plus the forward attention %v again, less %v", f.BackwardData, f.Forward, attnFwd, skipped)
			}
			if tc.r == 0 && f.BackwardWeight != f.Forward-attnFwd {
				t.Errorf("full fine-tuning: weight gradients %v, want every projection's forward %v", f.BackwardWeight, f.Forward-attnFwd)
			}
			if tc.r > 0 && f.BackwardWeight >= (f.Forward-attnFwd)/4 {
				t.Errorf("LoRA: weight gradients %v, want only adapters and classifier (far below %v)", f.BackwardWeight, f.Forward-attnFwd)
			}
		})
	}
}

// TestDocumentedFLOPsPerToken checks the per-token numbers docs/PERFORMANCE.md and the package documentation
// quote for BERT-base.
func TestDocumentedFLOPsPerToken(t *testing.T) {
	cfg, err := ModelConfig("bert-base")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		b, t, r int
		want    float64 // GFLOP per token, as documented (3 decimals)
	}{
		{"full 32×128", 32, 128, 0, 0.524},
		{"full 64×512", 64, 512, 0, 0.566},
		{"LoRA r=8 32×128", 32, 128, 8, 0.352},
		{"LoRA r=8 64×512", 64, 512, 8, 0.395},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := closedForm(cfg, tc.b, tc.t, tc.r) / float64(tc.b*tc.t) / 1e9
			if math.Abs(got-tc.want) > 0.0005 {
				t.Errorf("%.4f GFLOP/token, documented %.3f", got, tc.want)
			}
		})
	}
}
