//go:build cuda

package cuda_test

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// TestAttentionBwdWGMatchesMMA compares the warpgroup-MMA backward (kernels/attention_bwd_wg.cu, sm_90 with an
// NVRTC that compiles sm_90a) with the mma.sync backward (kernels/attention_bwd.cu) on D = 64 shapes spanning
// several blocks, tails, masks, causal with Tq ≠ Tk, segments, GQA and dropout (with and without stored keep
// bits), and requires the warpgroup path to be bit-identical run to run. The two paths use the same numerics
// but different summation orders inside the products, so they agree to the half dtype's rounding of dQ, dK
// and dV, not bit for bit. Both are also compared with the CPU by TestAttentionKernelsMatchCPU (whichever runs
// by default). Skips where the warpgroup kernels do not run.
func TestAttentionBwdWGMatchesMMA(t *testing.T) {
	gpu := openOrSkip(t)
	for _, dt := range wgDTypes(t, gpu) {
		for i, s := range []attnShape{
			{B: 2, Hq: 4, Hkv: 2, Tq: 200, Tk: 200, D: 64, mask: true},
			{B: 2, Hq: 2, Hkv: 1, Tq: 257, Tk: 257, D: 64, seg: true, p: 0.1},
			{B: 1, Hq: 2, Hkv: 2, Tq: 300, Tk: 65, D: 64, causal: true},
			{B: 1, Hq: 3, Hkv: 1, Tq: 130, Tk: 390, D: 64, causal: true, mask: true},
			{B: 2, Hq: 4, Hkv: 2, Tq: 200, Tk: 200, D: 64, mask: true, p: 0.1},
			{B: 1, Hq: 2, Hkv: 2, Tq: 256, Tk: 256, D: 64, seg: true, causal: true, p: 0.3, keepBits: true},
			{B: 2, Hq: 4, Hkv: 4, Tq: 512, Tk: 512, D: 64},
		} {
			t.Run(dt.String()+"/"+s.String(), func(t *testing.T) {
				d := s.data(uint64(40 + i))
				w1, w2 := runAttention(t, gpu, s, dt, d), runAttention(t, gpu, s, dt, d)
				restore := cuda.SetAttnBwdMMA(true)
				m := runAttention(t, gpu, s, dt, d)
				restore()
				for _, x := range []struct {
					name string
					a, b []float32
				}{{"dQ", w1.dq, w2.dq}, {"dK", w1.dk, w2.dk}, {"dV", w1.dv, w2.dv}} {
					for j := range x.a {
						if math.Float32bits(x.a[j]) != math.Float32bits(x.b[j]) {
							t.Fatalf("%s[%d] = %v, then %v: the warpgroup backward is not bit-identical run to run", x.name, j, x.a[j], x.b[j])
						}
					}
				}
				tol := map[tensor.DType]float64{tensor.BF16: 2e-2, tensor.F16: 4e-3}[dt]
				closeTo(t, "dQ", w1.dq, m.dq, tol)
				closeTo(t, "dK", w1.dk, m.dk, tol)
				closeTo(t, "dV", w1.dv, m.dv, tol)
				// The opt-in variants (TUNE_ATTN_BWD_WG) launch other kernels of the same module: each must
				// also agree with the mma.sync kernels and repeat its own bits.
				for _, v := range []string{"_o2", "_p"} {
					restore := cuda.SetAttnBwdWGVariant(v)
					a, b := runAttention(t, gpu, s, dt, d), runAttention(t, gpu, s, dt, d)
					restore()
					for j := range a.dq {
						if math.Float32bits(a.dq[j]) != math.Float32bits(b.dq[j]) {
							t.Fatalf("variant %s: dQ[%d] = %v, then %v: not bit-identical run to run", v, j, a.dq[j], b.dq[j])
						}
					}
					closeTo(t, "dQ"+v, a.dq, m.dq, tol)
					closeTo(t, "dK"+v, a.dk, m.dk, tol)
					closeTo(t, "dV"+v, a.dv, m.dv, tol)
				}
			})
		}
	}
}

// TestAttentionBwdWGShortFormIsGeneral requires the warpgroup backward's short elementwise form (tiles where no
// visibility test can fail: kernels/attention_bwd_wg.cu's ew_short_dq and ew_short_dkdv, with and without a key
// mask) to give the same bits as the general code that every tile ran before: whole tiles only, a key tail,
// causal diagonals beside interior tiles, key masks, dropout with and without stored keep bits, GQA, BF16 and
// F16. Segments never take the short form.
func TestAttentionBwdWGShortFormIsGeneral(t *testing.T) {
	gpu := openOrSkip(t)
	for _, dt := range wgDTypes(t, gpu) {
		for i, s := range []attnShape{
			{B: 2, Hq: 4, Hkv: 4, Tq: 256, Tk: 256, D: 64},
			{B: 2, Hq: 4, Hkv: 2, Tq: 256, Tk: 256, D: 64, p: 0.1},
			{B: 1, Hq: 4, Hkv: 4, Tq: 192, Tk: 192, D: 64, p: 0.2, keepBits: true},
			{B: 1, Hq: 2, Hkv: 2, Tq: 200, Tk: 200, D: 64, p: 0.1},
			{B: 1, Hq: 3, Hkv: 1, Tq: 256, Tk: 320, D: 64, causal: true, p: 0.1, keepBits: true},
			{B: 2, Hq: 4, Hkv: 2, Tq: 256, Tk: 256, D: 64, mask: true, p: 0.1, keepBits: true},
			{B: 2, Hq: 2, Hkv: 2, Tq: 200, Tk: 200, D: 64, mask: true},
			{B: 1, Hq: 2, Hkv: 1, Tq: 192, Tk: 256, D: 64, causal: true, mask: true, p: 0.1},
		} {
			t.Run(dt.String()+"/"+s.String(), func(t *testing.T) {
				d := s.data(uint64(70 + i))
				short := runAttention(t, gpu, s, dt, d)
				restore := cuda.SetAttnBwdEWGeneral(true)
				general := runAttention(t, gpu, s, dt, d)
				restore()
				for _, x := range []struct {
					name string
					a, b []float32
				}{{"dQ", short.dq, general.dq}, {"dK", short.dk, general.dk}, {"dV", short.dv, general.dv}} {
					for j := range x.a {
						if math.Float32bits(x.a[j]) != math.Float32bits(x.b[j]) {
							t.Fatalf("%s[%d] = %v with the short form, %v with the general code", x.name, j, x.a[j], x.b[j])
						}
					}
				}
			})
		}
	}
}

// wgDTypes returns the half dtypes the warpgroup-MMA backward runs for on gpu, skipping the test where it does
// not run (another device, or an NVRTC that cannot compile sm_90a).
func wgDTypes(t *testing.T, gpu *cuda.Backend) []tensor.DType {
	t.Helper()
	dts := []tensor.DType{tensor.BF16, tensor.F16}
	for _, dt := range dts {
		on, err := cuda.AttnBwdWG(gpu, dt)
		if err != nil {
			t.Fatal(err)
		}
		if !on {
			t.Skipf("%v: the warpgroup-MMA backward does not run on this device or NVRTC", dt)
		}
	}
	return dts
}
