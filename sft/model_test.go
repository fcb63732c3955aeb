package sft

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer"
	_ "github.com/tune-ml/tune/transformer/llama"
)

// TestTinyLlamaLosses: on the tiny random Llama of testdata/sft (tools/reference/decoder_sft_goldens.py),
// the causal-LM loss and TRL's mean token accuracy of each completion-only example equal transformers', and
// the mean over a batch of them is the same padded (one example per row) and packed (one row, segments).
func TestTinyLlamaLosses(t *testing.T) {
	dir := filepath.Join("..", "testdata", "sft", "tiny-llama")
	m, _, err := transformer.Open(dir, cpu.New(), transformer.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "goldens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Examples []struct {
			InputIDs []int32 `json:"input_ids"`
			Labels   []int32 `json:"labels"`
			Loss     float64 `json:"loss"`
			Acc      float64 `json:"mean_token_accuracy"`
		} `json:"examples"`
		Batch struct {
			Loss float64 `json:"loss"`
		} `json:"batch"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	d := &Dataset{MaxLength: 64}
	for i, e := range g.Examples {
		d.Examples = append(d.Examples, Example{InputIDs: e.InputIDs, Labels: e.Labels, Line: i + 1})
		b, err := Collate(d.Rows(false)[i:i+1], 0)
		if err != nil {
			t.Fatal(err)
		}
		out, err := m.Forward(b, transformer.ForwardOptions{HostLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		c, n := TokenAccuracy(out.Logits, b.Labels, b.B, b.T, out.NumLabels)
		if math.Abs(float64(out.Loss)-e.Loss) > 1e-4 || math.Abs(float64(c)/float64(n)-e.Acc) > 1e-9 {
			t.Errorf("example %d: loss %v accuracy %d/%d, want %v and %v", i, out.Loss, c, n, e.Loss, e.Acc)
		}
	}
	for _, packed := range []bool{false, true} {
		b, err := Collate(d.Rows(packed), 0)
		if err != nil {
			t.Fatal(err)
		}
		out, err := m.Forward(b, transformer.ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(float64(out.Loss)-g.Batch.Loss) > 1e-4 {
			t.Errorf("packed %v (B=%d T=%d): loss %v, want transformers' %v", packed, b.B, b.T, out.Loss, g.Batch.Loss)
		}
		t.Logf("packed=%v B=%d T=%d loss %.6f (transformers %.6f)", packed, b.B, b.T, out.Loss, g.Batch.Loss)
	}
}
