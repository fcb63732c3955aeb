package llama

import (
	"testing"

	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/transformertest"
)

// TestGradientMatchesFiniteDifferences checks Backward against central differences of the FP32 loss for every
// parameter tensor (at its largest-gradient element and two pseudo-random ones), on each variant: Llama with
// llama3 rope and GQA (untied), Qwen2 with q/k/v biases (tied), Qwen3 with q/k norms (tied, with a padding
// id whose embedding row the tied head still trains; the lookup's exclusion of it is checked against
// transformers in the goldens), and a small LM-head chunk so the loss runs in pieces.
func TestGradientMatchesFiniteDifferences(t *testing.T) {
	qwen3 := tinyConfig(t, "qwen3")
	qwen3.PadTokenID = 3
	for _, c := range []struct {
		name  string
		cfg   Config
		chunk int
	}{
		{"llama, llama3 rope, GQA, untied", tinyConfig(t, "llama"), 0},
		{"qwen2, q/k/v biases, tied", tinyConfig(t, "qwen2"), 0},
		{"qwen3, q/k norm, tied, padding id, LM head in chunks of 5 rows", qwen3, 5 * 37},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := cpuBackend()
			m := newModel(t, b, c.cfg, 3)
			if c.chunk > 0 {
				m.Head.ChunkElems = c.chunk
			}
			batch := testBatch(3, 6, c.cfg.VocabSize, []int{6, 3, 5})
			transformertest.Step(t, m, batch, 0)
			loss := func() float64 {
				out, err := m.Forward(batch, transformer.ForwardOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return float64(out.Loss)
			}
			extra := func(name string) []int {
				if name == "model.embed_tokens.weight" && c.cfg.PadTokenID >= 0 {
					return []int{c.cfg.PadTokenID*c.cfg.HiddenSize + 1}
				}
				return nil
			}
			transformertest.GradCheck(t, m, loss, extra, 1e-2, 2e-2, 3e-4)
		})
	}
}
