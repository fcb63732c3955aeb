package bert

import (
	"github.com/tune-ml/tune/transformer"
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer/detweights"
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
			step(t, m, batch, seed)
			loss := func() float64 {
				out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true, Train: true, Seed: seed})
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

// upload writes host values into a parameter and invalidates the weight cache.
func upload(t testing.TB, m *BertForSequenceClassification, np transformer.NamedParameter, w []float32) {
	t.Helper()
	if err := m.Backend().Upload(np.Param.Value, w); err != nil {
		t.Fatal(err)
	}
	m.WeightsUpdated()
}
