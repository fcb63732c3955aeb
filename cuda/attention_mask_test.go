//go:build cuda

package cuda_test

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// TestAttentionZeroMaskRowIsUnmasked: a batch member whose key mask is zero at every key (one entry −0) runs
// the kernels' unmasked form (unmasked_form in kernels/attention.cuh), so its O, LSE, dQ, dK and dV have the
// bits of the same call without a mask, on the warpgroup and the mma.sync kernels alike. The padded member
// beside it keeps the masked form; TestAttentionKernelsMatchCPU checks that one's values.
func TestAttentionZeroMaskRowIsUnmasked(t *testing.T) {
	gpu := openOrSkip(t)
	for _, mma := range []bool{false, true} {
		for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
			for i, s := range []attnShape{
				{B: 2, Hq: 4, Hkv: 4, Tq: 256, Tk: 256, D: 64, mask: true},
				{B: 2, Hq: 4, Hkv: 2, Tq: 200, Tk: 200, D: 64, mask: true, p: 0.1, keepBits: true},
				{B: 2, Hq: 2, Hkv: 2, Tq: 192, Tk: 256, D: 128, mask: true, causal: true, p: 0.1},
			} {
				name := "wgmma"
				if mma {
					name = "mma"
				}
				t.Run(name+"/"+dt.String()+"/"+s.String(), func(t *testing.T) {
					defer cuda.SetAttnFwdMMA(mma)()
					defer cuda.SetAttnBwdMMA(mma)()
					d := s.data(uint64(90 + i))
					for j := 0; j < s.Tk; j++ {
						d.mask[j] = 0
					}
					d.mask[3] = float32(math.Copysign(0, -1))
					if d.mask[s.Tk+s.Tk-1] == 0 {
						t.Fatal("member 1 has no padding: the test would not mix the two forms")
					}
					masked := runAttention(t, gpu, s, dt, d)
					d.mask = nil
					plain := runAttention(t, gpu, s, dt, d)
					nq, nk := s.Hq*s.Tq*s.D, s.Hkv*s.Tk*s.D
					for _, x := range []struct {
						name string
						a, b []float32
					}{{"O", masked.o[:nq], plain.o[:nq]}, {"LSE", masked.lse[:s.Hq*s.Tq], plain.lse[:s.Hq*s.Tq]},
						{"dQ", masked.dq[:nq], plain.dq[:nq]}, {"dK", masked.dk[:nk], plain.dk[:nk]}, {"dV", masked.dv[:nk], plain.dv[:nk]}} {
						for j := range x.a {
							if math.Float32bits(x.a[j]) != math.Float32bits(x.b[j]) {
								t.Fatalf("member 0's %s[%d] = %v under its zero mask, %v without a mask", x.name, j, x.a[j], x.b[j])
							}
						}
					}
				})
			}
		}
	}
}
