package amp

import (
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// TestClipAfterUnscaleB09 checks clipping after unscale_ (torch/amp/grad_scaler.py): one 2-element parameter at zero, loss = 1.2·p0 + 1.6·p1 (true gradient
// [1.2, 1.6], norm 2), FP16 loss scale 65536, max_grad_norm 1, SGD with lr 1. Clipping after Unscale reports
// 2.0 and moves the parameters to [−0.5999997, −0.7999997]; clipping before Unscale (the bug) reports 131072
// and barely moves them.
func TestClipAfterUnscaleB09(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		const scale = 65536
		run := func(t *testing.T, clipFirst bool) (norm float64, params []float32) {
			s, err := NewGradScalerFor(b, FP16)
			must(t, err)
			p := tensortest.Upload(t, b, tensor.F32, []float32{0, 0})
			// backward of (loss·scale): the true gradient times the seed, in FP32
			g := tensortest.Upload(t, b, tensor.F32, []float32{float32(1.2) * scale, float32(1.6) * scale})
			grads := []*tensor.Tensor{g}
			if clipFirst {
				norm, err = ClipGradNorm(b, grads, 1)
				must(t, err)
				must(t, s.Unscale(grads))
			} else {
				must(t, s.Unscale(grads))
				norm, err = ClipGradNorm(b, grads, 1)
				must(t, err)
			}
			skipped, err := s.Step(func() error { return b.Axpy(p, g, -1) }) // SGD, lr 1
			must(t, err)
			if skipped {
				t.Fatal("finite gradients skipped")
			}
			must(t, s.Update())
			return norm, tensortest.Download(t, b, p)
		}
		t.Run("clip after unscale", func(t *testing.T) {
			norm, params := run(t, false)
			if math.Abs(norm-2) > 1e-6 {
				t.Errorf("reported grad norm %v, want 2.0", norm)
			}
			for i, want := range []float32{-0.5999997, -0.7999997} {
				if math.Abs(float64(params[i]-want)) > 1e-7 {
					t.Errorf("param[%d] = %.9g, want %.9g", i, params[i], want)
				}
			}
		})
		t.Run("clip before unscale is the bug", func(t *testing.T) {
			norm, params := run(t, true)
			if math.Abs(norm-131072) > 0.1 {
				t.Errorf("buggy order reported %v, want 131072 (the scaled norm)", norm)
			}
			for i, want := range []float64{-9.155e-06, -1.2207e-05} {
				if math.Abs(float64(params[i])-want) > 1e-3*math.Abs(want) {
					t.Errorf("buggy order param[%d] = %.5g, want ≈ %.5g", i, params[i], want)
				}
			}
		})
	})
}

// TestClipGradNorm checks torch.nn.utils.clip_grad_norm_ semantics: the norm over all tensors, the FP32
// coefficient max/(total+1e-6) (reciprocal first, as Tensor.__rdiv__), no change at or below the limit,
// non-finite norms returned untouched.
func TestClipGradNorm(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	tests := []struct {
		name     string
		dt       tensor.DType
		grads    [][]float32 // nil entry: a frozen parameter
		maxNorm  float64
		wantNorm float64
		clipped  bool
	}{
		{"global norm of two tensors is 5, clipped to 1", tensor.F32, [][]float32{{3}, {4}}, 1, 5, true},
		{"below the limit is untouched", tensor.F32, [][]float32{{0.3, 0.4}}, 1, 0.5, false},
		{"nil gradients are skipped", tensor.F32, [][]float32{nil, {6, 8}}, 2, 10, true},
		{"zero gradients stay zero", tensor.F32, [][]float32{{0, 0}}, 1, 0, false},
		{"inf gradient: norm inf, untouched", tensor.F32, [][]float32{{1, inf}}, 1, math.Inf(1), false},
		{"NaN gradient: norm NaN, untouched", tensor.F32, [][]float32{{nan, 1}}, 1, math.NaN(), false},
		{"bf16 gradients clip too", tensor.BF16, [][]float32{{3, 4}}, 1, 5, true},
	}
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var ts []*tensor.Tensor
				for _, g := range tt.grads {
					if g == nil {
						ts = append(ts, nil)
						continue
					}
					ts = append(ts, tensortest.Upload(t, b, tt.dt, g))
				}
				norm, err := ClipGradNorm(b, ts, tt.maxNorm)
				must(t, err)
				if !(math.Abs(norm-tt.wantNorm) < 1e-6 || math.IsNaN(norm) && math.IsNaN(tt.wantNorm) || norm == tt.wantNorm) {
					t.Errorf("norm %v, want %v", norm, tt.wantNorm)
				}
				coef := (1 / (float32(norm) + 1e-6)) * float32(tt.maxNorm)
				for i, g := range tt.grads {
					if g == nil {
						continue
					}
					got := tensortest.Download(t, b, ts[i])
					for j, v := range g {
						want := tensor.RoundTo(tt.dt, v)
						if tt.clipped {
							want = tensor.RoundTo(tt.dt, want*coef)
						}
						if math.Float32bits(got[j]) != math.Float32bits(want) && !(got[j] != got[j] && want != want) {
							t.Errorf("grad[%d][%d] = %v, want %v", i, j, got[j], want)
						}
					}
				}
			})
		}
	})
}

func TestClipGradNormErrors(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		g := []*tensor.Tensor{tensortest.Upload(t, b, tensor.F32, []float32{1})}
		for _, m := range []float64{0, -1, math.NaN(), math.Inf(1)} {
			if _, err := ClipGradNorm(b, g, m); err == nil || !strings.Contains(err.Error(), "max_grad_norm") {
				t.Errorf("ClipGradNorm(max_norm=%v) error = %v, want one pointing at max_grad_norm", m, err)
			}
		}
	})
}
