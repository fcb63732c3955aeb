package transformertest

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/detweights"
)

// GradCheck compares the gradient m holds (the caller ran one Forward and Backward(1) from zeroed gradients)
// with central differences (L(w+ε) − L(w−ε))/2ε of loss, for every trainable parameter at its largest-gradient
// element, two pseudo-random ones (from the parameter's name) and the indices extra returns for it (may be
// nil). An element passes when |fd − analytic| ≤ rel·|analytic| + abs. loss must run a deterministic Forward
// (dropout masks are a function of the seed and offset).
func GradCheck(t *testing.T, m transformer.Model, loss func() float64, extra func(name string) []int, eps, rel, abs float64) {
	t.Helper()
	b := m.Backend()
	checked, worst := 0, 0.0
	for _, np := range m.NamedParameters() {
		if np.Grad == nil {
			continue
		}
		g := tensortest.Download(t, b, np.Grad)
		w := tensortest.Download(t, b, np.Value)
		idx := []int{argmaxAbs(g)}
		x := detweights.FNV1a64(np.Name)
		for range 2 {
			x = detweights.SplitMix64(x)
			idx = append(idx, int(x%uint64(len(w))))
		}
		if extra != nil {
			idx = append(idx, extra(np.Name)...)
		}
		set := func() {
			if err := b.Upload(np.Value, w); err != nil {
				t.Fatal(err)
			}
			m.WeightsUpdated()
		}
		for _, i := range idx {
			orig := w[i]
			w[i] = orig + float32(eps)
			set()
			lp := loss()
			w[i] = orig - float32(eps)
			set()
			lm := loss()
			w[i] = orig
			set()
			fd := (lp - lm) / (2 * eps)
			an := float64(g[i])
			diff := math.Abs(fd - an)
			if diff > rel*math.Abs(an)+abs {
				t.Errorf("%s[%d]: analytic %.6g, finite difference %.6g", np.Name, i, an, fd)
			}
			worst = math.Max(worst, diff)
			checked++
		}
	}
	t.Logf("%d elements checked, worst absolute difference %.3g", checked, worst)
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
