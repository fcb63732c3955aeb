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
