package bert

import (
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/transformertest"
	"testing"
)

// TestGradientMatchesFiniteDifferences checks Backward against central differences of the FP32 loss: for every
// parameter tensor, at its largest-gradient element and two pseudo-random ones, (L(w+ε) − L(w−ε))/2ε must
// match the analytic gradient. The dropout rows keep dropout on: the masks are a function of (seed, offset),
// so the loss stays a deterministic function of the weights and the check covers the dropout backward too.
func TestGradientMatchesFiniteDifferences(t *testing.T) {
	regression := tinyConfig()
	regression.ID2Label = DefaultLabels(1)
	dropout := tinyConfig()
	dropout.HiddenDropoutProb, dropout.AttentionProbsDropoutProb = 0.1, 0.1
	for _, c := range []struct {
		name    string
		cfg     BertConfig
		targets bool
	}{
		{"classification with padding and an ignored label", tinyConfig(), false},
		{"classification with hidden, attention and classifier dropout", dropout, false},
		{"regression (MSE on squeezed logits)", regression, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := cpuBackend()
			m := newTestModel(t, b, c.cfg, 3)
			batch := testBatch(3, 6, c.cfg.VocabSize, c.cfg.NumLabels(), []int{6, 3, 5})
			if c.targets {
				batch.Labels, batch.Targets = nil, []float32{0.5, -1.25, 2}
			}
			const seed = 77
			transformertest.Step(t, m, batch, seed)
			loss := func() float64 {
				out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true, Train: true, Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				return float64(out.Loss)
			}
			transformertest.GradCheck(t, m, loss, nil, 1e-2, 2e-2, 3e-4)
		})
	}
}

// upload writes host values into a parameter and invalidates the weight cache.
func upload(t testing.TB, m *BertForSequenceClassification, np transformer.NamedParameter, w []float32) {
	t.Helper()
	if err := m.Backend().Upload(np.Param.Value, w); err != nil {
		t.Fatal(err)
	}
	m.WeightsUpdated()
}
