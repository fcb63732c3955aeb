package amp

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// TestClipGradNormOnDeviceIsClipGradNorm: the device-side clip leaves the gradients and the norm bit for bit
// where ClipGradNorm leaves them (clipping, not clipping, max_norm 0), and a non-finite gradient sets the flag
// and changes nothing.
func TestClipGradNormOnDeviceIsClipGradNorm(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		vals := [][]float32{{1.5, -2.25, 3, 0.125, -7}, {0.5, 0.75, -1}}
		load := func() []*tensor.Tensor {
			return []*tensor.Tensor{tensortest.Upload(t, b, tensor.F32, vals[0]), nil, tensortest.Upload(t, b, tensor.BF16, vals[1])}
		}
		norm, flag := tensortest.Alloc(t, b, tensor.I64, 1), tensortest.Alloc(t, b, tensor.I32, 1)
		for _, maxNorm := range []float64{0, 1, 2.5, 100} {
			host, dev := load(), load()
			var want float64
			var err error
			if maxNorm > 0 {
				want, err = ClipGradNorm(b, host, maxNorm)
			} else {
				want, err = b.GlobalNorm([]*tensor.Tensor{host[0], host[2]})
			}
			must(t, err)
			must(t, ClipGradNormOnDevice(b, dev, maxNorm, norm, flag))
			bits := make([]int64, 1)
			must(t, b.Download(bits, norm))
			if got := math.Float64frombits(uint64(bits[0])); got != want {
				t.Errorf("max_norm %v: norm %v, ClipGradNorm %v", maxNorm, got, want)
			}
			for _, i := range []int{0, 2} {
				h, d := tensortest.Download(t, b, host[i]), tensortest.Download(t, b, dev[i])
				for k := range h {
					if math.Float32bits(h[k]) != math.Float32bits(d[k]) {
						t.Errorf("max_norm %v: grad %d[%d] = %v, ClipGradNorm %v", maxNorm, i, k, d[k], h[k])
					}
				}
			}
		}
		f := make([]int32, 1)
		must(t, b.Download(f, flag))
		if f[0] != 0 {
			t.Fatalf("finite gradients set the flag")
		}
		bad := load()
		poisoned := []float32{1, float32(math.NaN()), 3, 4, 5}
		must(t, b.Upload(bad[0], poisoned))
		must(t, ClipGradNormOnDevice(b, bad, 1, norm, flag))
		must(t, b.Download(f, flag))
		if f[0] != 1 {
			t.Errorf("a NaN gradient left the flag at %d", f[0])
		}
		got := tensortest.Download(t, b, bad[0])
		if got[0] != 1 || got[4] != 5 {
			t.Errorf("a non-finite norm scaled the gradients: %v", got)
		}
		if err := ClipGradNormOnDevice(b, bad, -1, norm, flag); err == nil {
			t.Error("max_norm -1 accepted")
		}
	})
}

// TestGradNormOnDevice: the norm ClipGradNormOnDevice writes, the gradients untouched, the flag set by a
// non-finite norm only and left alone without a flag tensor; AdamW clipping by that norm (AdamWArgs.GradNorm)
// leaves the weights ClipGradNormOnDevice then AdamW leave.
func TestGradNormOnDevice(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		vals := []float32{1.5, -2.25, 3, 0.125, -7, 0.5, 0.75, -1}
		norm, ref, flag := tensortest.Alloc(t, b, tensor.I64, 1), tensortest.Alloc(t, b, tensor.I64, 1), tensortest.Alloc(t, b, tensor.I32, 1)
		must(t, b.Fill(flag, 0))
		for _, maxNorm := range []float64{0, 1, 100} {
			g, clipped := tensortest.Upload(t, b, tensor.F32, vals), tensortest.Upload(t, b, tensor.F32, vals)
			must(t, GradNormOnDevice(b, []*tensor.Tensor{g, nil}, norm, flag))
			must(t, ClipGradNormOnDevice(b, []*tensor.Tensor{clipped}, maxNorm, ref, nil))
			nb, rb := make([]int64, 1), make([]int64, 1)
			must(t, b.Download(nb, norm))
			must(t, b.Download(rb, ref))
			if nb[0] != rb[0] {
				t.Errorf("max_norm %v: norm bits %x, ClipGradNormOnDevice's %x", maxNorm, nb[0], rb[0])
			}
			for k, x := range tensortest.Download(t, b, g) {
				if math.Float32bits(x) != math.Float32bits(vals[k]) {
					t.Fatalf("GradNormOnDevice changed gradient %d: %v, was %v", k, x, vals[k])
				}
			}
			step := func(grads *tensor.Tensor, clip bool) []float32 {
				p, m, v := tensortest.Upload(t, b, tensor.F32, vals), tensortest.Alloc(t, b, tensor.F32, len(vals)), tensortest.Alloc(t, b, tensor.F32, len(vals))
				must(t, b.Fill(m, 0))
				must(t, b.Fill(v, 0))
				a := tensor.AdamWArgs{Params: p, Grads: grads, ExpAvg: m, ExpAvgSq: v, LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1}
				if clip {
					a.GradNorm, a.MaxGradNorm = norm, float32(maxNorm)
				}
				must(t, b.AdamW(a))
				return tensortest.Download(t, b, p)
			}
			want, got := step(clipped, false), step(g, true)
			for k := range want {
				if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
					t.Errorf("max_norm %v: weight %d = %v, after ClipGradNormOnDevice %v", maxNorm, k, got[k], want[k])
				}
			}
		}
		f := make([]int32, 1)
		must(t, b.Download(f, flag))
		if f[0] != 0 {
			t.Fatalf("finite gradients set the flag")
		}
		bad := tensortest.Upload(t, b, tensor.F32, []float32{1, float32(math.Inf(1))})
		must(t, GradNormOnDevice(b, []*tensor.Tensor{bad}, norm, nil))
		must(t, b.Download(f, flag))
		if f[0] != 0 {
			t.Fatalf("no flag tensor given, yet the flag was set")
		}
		must(t, GradNormOnDevice(b, []*tensor.Tensor{bad}, norm, flag))
		must(t, b.Download(f, flag))
		if f[0] != 1 {
			t.Errorf("an Inf gradient left the flag at %d", f[0])
		}
	})
}
