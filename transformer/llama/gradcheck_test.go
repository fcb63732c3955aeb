package llama

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/detweights"
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
				m.LossChunk = c.chunk
			}
			batch := testBatch(3, 6, c.cfg.VocabSize, []int{6, 3, 5})
			step(t, m, batch)
			loss := func() float64 {
				out, err := m.Forward(batch, transformer.ForwardOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return float64(out.Loss)
			}
			const eps = 1e-2
			checked, worst := 0, 0.0
			for _, np := range m.namedParameters() {
				g := tensortest.Download(t, b, np.Param.Grad)
				w := tensortest.Download(t, b, np.Param.Value)
				idx := []int{argmaxAbs(g)}
				x := detweights.FNV1a64(np.Name)
				for range 2 {
					x = detweights.SplitMix64(x)
					idx = append(idx, int(x%uint64(len(w))))
				}
				if np.Name == "model.embed_tokens.weight" && c.cfg.PadTokenID >= 0 {
					idx = append(idx, c.cfg.PadTokenID*c.cfg.HiddenSize+1)
				}
				for _, i := range idx {
					orig := w[i]
					w[i] = orig + eps
					upload(t, m, np, w)
					lp := loss()
					w[i] = orig - eps
					upload(t, m, np, w)
					lm := loss()
					w[i] = orig
					upload(t, m, np, w)
					fd := (lp - lm) / (2 * eps)
					an := float64(g[i])
					diff := math.Abs(fd - an)
					if diff > 2e-2*math.Abs(an)+3e-4 {
						t.Errorf("%s[%d]: analytic %.6g, finite difference %.6g", np.Name, i, an, fd)
					}
					worst = math.Max(worst, diff)
					checked++
				}
			}
			t.Logf("%d elements checked, worst absolute difference %.3g", checked, worst)
		})
	}
}

func argmaxAbs(v []float32) int {
	best := 0
	for i, x := range v {
		if math.Abs(float64(x)) > math.Abs(float64(v[best])) {
			best = i
		}
	}
	return best
}

func upload(t testing.TB, m *ForCausalLM, np transformer.NamedParameter, w []float32) {
	t.Helper()
	if err := m.Backend().Upload(np.Param.Value, w); err != nil {
		t.Fatal(err)
	}
	m.WeightsUpdated()
}
