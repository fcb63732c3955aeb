//go:build cuda

package cuda_test

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// TestAttentionBwdBlockOrder runs the backward on the kernel-test shapes that take the tensor-core kernels, and
// on SmolLM2's GQA grouping, GQA with D = 128 and a long causal shape with stored keep bits: dQ, dK and dV must
// match the CPU reference and be bit-identical from run to run and with block-order chunks of 4 (batch, head)
// pairs instead of as many as fit 16 MiB (the D = 64 kernels' longest-first order, order_block: the order in
// which blocks run must not change a bit). F16 runs on the causal GQA shapes only.
func TestAttentionBwdBlockOrder(t *testing.T) {
	gpu := openOrSkip(t)
	ref := cpu.New()
	shapes := append(append([]attnShape{}, attnShapes...),
		attnShape{B: 2, Hq: 9, Hkv: 3, Tq: 320, Tk: 320, D: 64, causal: true},  // SmolLM2's grouping
		attnShape{B: 1, Hq: 6, Hkv: 2, Tq: 200, Tk: 200, D: 128, causal: true}, // GQA, D = 128
		attnShape{B: 1, Hq: 4, Hkv: 4, Tq: 900, Tk: 900, D: 64, causal: true, keepBits: true, p: 0.1})
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
		for i, s := range shapes {
			if s.unaligned || (s.D != 64 && s.D != 128) || (dt == tensor.F16 && (!s.causal || s.Hq == s.Hkv)) {
				continue // the general kernels (and F16 beyond causal GQA)
			}
			t.Run(dt.String()+"/"+s.String(), func(t *testing.T) {
				d := s.data(uint64(i + 1))
				g1, g2 := runAttention(t, gpu, s, dt, d), runAttention(t, gpu, s, dt, d)
				// Chunks of 4 pairs (causal only; the last one partial when B·heads % 4 ≠ 0).
				restore := cuda.SetAttnChunkBytes(4 * 2 * max(s.Tq, s.Tk) * s.D * 2)
				g3 := runAttention(t, gpu, s, dt, d)
				restore()
				c := runAttention(t, ref, s, dt, d)
				tol := map[tensor.DType]float64{tensor.BF16: 2e-2, tensor.F16: 4e-3}[dt]
				closeTo(t, "dQ", g1.dq, c.dq, 2*tol)
				closeTo(t, "dK", g1.dk, c.dk, 2*tol)
				closeTo(t, "dV", g1.dv, c.dv, 2*tol)
				same := func(what string, name string, a, b []float32) {
					t.Helper()
					for k := range a {
						if math.Float32bits(a[k]) != math.Float32bits(b[k]) {
							t.Fatalf("%s: %s[%d] = %v, then %v", what, name, k, a[k], b[k])
						}
					}
				}
				same("run to run", "dQ", g1.dq, g2.dq)
				same("run to run", "dK", g1.dk, g2.dk)
				same("run to run", "dV", g1.dv, g2.dv)
				same("chunks of 4", "dQ", g1.dq, g3.dq)
				same("chunks of 4", "dK", g1.dk, g3.dk)
				same("chunks of 4", "dV", g1.dv, g3.dv)
			})
		}
	}
}
