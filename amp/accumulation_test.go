package amp

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// gaWindow runs one optimizer step's accumulation window of ga micro-batches of one row each under p, with the
// scaler s (disabled for FP32): every micro-batch loss is divided by ga (the seed is Scale()/ga), its backward
// accumulates into the FP32 gradients, and once per window the gradients are unscaled and clipped. It returns the
// logged loss (the mean of the unscaled micro-batch losses), the pre-clip gradient norm and the gradients.
func gaWindow(t *testing.T, b tensor.Backend, p Policy, s *GradScaler, ga int) (logged, gradNorm float64, grads []float32) {
	const in, hid, out = 8, 16, 3
	m := newMLP(t, b, in, hid, out, 7)
	x, target := randData(t, b, ga, in, out, 8)
	var cache *WeightCache
	if p.Enabled {
		cache = NewWeightCache(b, p.DType)
		defer cache.Free()
	}
	must(t, b.Fill(m.grads, 0))
	for i := range ga {
		xi, err := x.View(i*in, 1, in)
		must(t, err)
		ti, err := target.View(i*out, 1, out)
		must(t, err)
		st := m.forwardBackward(t, p, cache, xi, ti, 1, s.Scale()/float32(ga))
		logged += st.loss / float64(ga)
	}
	must(t, s.Unscale(m.gradList())) // once per window, never per micro-batch
	gradNorm, err := ClipGradNorm(b, m.gradList(), 1)
	must(t, err)
	skipped, err := s.Step(func() error { return nil })
	must(t, err)
	if skipped {
		t.Fatalf("%v: the window's step was skipped", p)
	}
	must(t, s.Update())
	return logged, gradNorm, tensortest.Download(t, b, m.grads)
}

// TestAccumulationLoggedLossB15 checks the unscaled logged loss (transformers' trainer.py): micro-batch 1, gradient accumulation 8, one optimizer step, in FP32
// and in FP16 with the scale at 65536. The logged loss is the mean unscaled loss over the window and the logged
// grad norm the unscaled one, both within 1e-2 relative of FP32: never multiplied by the scale or by the
// accumulation count. The scale stays constant over the window, so the unscaled accumulated gradients match
// FP32's.
func TestAccumulationLoggedLossB15(t *testing.T) {
	const ga = 8
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		off, err := NewGradScalerFor(b, FP32)
		must(t, err)
		refLoss, refNorm, refGrads := gaWindow(t, b, FP32, off, ga)
		s, err := NewGradScalerFor(b, FP16)
		must(t, err)
		if s.Scale() != 65536 {
			t.Fatalf("FP16 scale %v, want 65536", s.Scale())
		}
		loss, norm, grads := gaWindow(t, b, FP16, s, ga)
		t.Logf("fp32: logged loss %.6f grad norm %.6f; fp16 at scale 65536: logged loss %.6f grad norm %.6f; gradient error %.2g",
			refLoss, refNorm, loss, norm, relErr(grads, refGrads))
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"logged loss", loss, refLoss}, {"grad norm", norm, refNorm}} {
			if math.Abs(c.got-c.want) > 1e-2*math.Abs(c.want) {
				t.Errorf("fp16 %s %v, fp32 %v: want within 1e-2 relative (×65536 = %v, ×8 = %v would be the bugs)",
					c.name, c.got, c.want, c.want*65536, c.want*ga)
			}
		}
		if e := relErr(grads, refGrads); e > 1e-2 {
			t.Errorf("accumulated fp16 gradients differ from fp32 by %.3g (relative L2), want ≤ 1e-2", e)
		}
	})
}
