//go:build cuda

package cuda_test

import (
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// TestAttentionBwdV3MatchesCPU runs the backward variant v3 (TUNE_ATTN_BWD=v3) on the kernel-test shapes
// that take the tensor-core kernels: dQ, dK and dV must match the CPU reference at the default path's
// tolerances and be bit-identical from run to run and with chunks of 4 (batch, head) pairs instead of one
// (the block order must not matter); dQ (same kernel body, other block order) and, without GQA, dK and dV
// must be bit-identical to the default path's. F16 runs on the causal GQA shapes only.
func TestAttentionBwdV3MatchesCPU(t *testing.T) {
	gpu := openOrSkip(t)
	ref := cpu.New()
	shapes := append(append([]attnShape{}, attnShapes...),
		attnShape{B: 2, Hq: 9, Hkv: 3, Tq: 320, Tk: 320, D: 64, causal: true},  // SmolLM2's grouping
		attnShape{B: 1, Hq: 6, Hkv: 2, Tq: 200, Tk: 200, D: 128, causal: true}, // GQA, D = 128
		attnShape{B: 1, Hq: 4, Hkv: 4, Tq: 900, Tk: 900, D: 64, causal: true, keepBits: true, p: 0.1})
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
		for i, s := range shapes {
			if s.unaligned || (s.D != 64 && s.D != 128) || (dt == tensor.F16 && (!s.causal || s.Hq == s.Hkv)) {
				continue // the general kernels, which v3 leaves as they are (and F16 beyond causal GQA)
			}
			t.Run(dt.String()+"/"+s.String(), func(t *testing.T) {
				d := s.data(uint64(i + 1))
				restore := cuda.SetAttnBwdVariant("")
				def := runAttention(t, gpu, s, dt, d)
				restore()
				defer cuda.SetAttnBwdVariant("v3")()
				g1, g2 := runAttention(t, gpu, s, dt, d), runAttention(t, gpu, s, dt, d)
				// Chunks of 4 pairs (causal only; the last one partial when B·heads % 4 ≠ 0).
				restoreChunk := cuda.SetAttnV3ChunkBytes(4 * 2 * max(s.Tq, s.Tk) * s.D * 2)
				g3 := runAttention(t, gpu, s, dt, d)
				restoreChunk()
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
				same("v3 run to run", "dQ", g1.dq, g2.dq)
				same("v3 run to run", "dK", g1.dk, g2.dk)
				same("v3 run to run", "dV", g1.dv, g2.dv)
				same("v3 chunks of 4", "dQ", g1.dq, g3.dq)
				same("v3 chunks of 4", "dK", g1.dk, g3.dk)
				same("v3 chunks of 4", "dV", g1.dv, g3.dv)
				same("v3 vs default", "dQ", g1.dq, def.dq)
				if s.Hq == s.Hkv {
					same("v3 vs default", "dK", g1.dk, def.dk)
					same("v3 vs default", "dV", g1.dv, def.dv)
				}
			})
		}
	}
}

// TestAttentionBwdVariantUnknown: a TUNE_ATTN_BWD value that names no variant is an error naming it.
func TestAttentionBwdVariantUnknown(t *testing.T) {
	gpu := openOrSkip(t)
	const T, D = 64, 64
	var bufs []*tensor.Tensor
	mk := func(dt tensor.DType, n int) tensor.AttnOperand {
		x, err := gpu.Alloc(dt, n)
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, x)
		return tensor.AttnOperand{T: x}
	}
	defer func() {
		for _, x := range bufs {
			gpu.Free(x)
		}
	}()
	a := tensor.AttentionArgs{B: 1, Hq: 1, Hkv: 1, Tq: T, Tk: T, D: D, Q: mk(tensor.BF16, T*D), K: mk(tensor.BF16, T*D),
		V: mk(tensor.BF16, T*D), O: mk(tensor.BF16, T*D), LSE: mk(tensor.F32, T).T, Scale: 0.125}
	ba := tensor.AttentionBackwardArgs{AttentionArgs: a, DO: mk(tensor.BF16, T*D), DQ: mk(tensor.BF16, T*D),
		DK: mk(tensor.BF16, T*D), DV: mk(tensor.BF16, T*D)}
	defer cuda.SetAttnBwdVariant("v99")()
	err := gpu.AttentionBackward(ba)
	if err == nil || !strings.Contains(err.Error(), `TUNE_ATTN_BWD="v99"`) {
		t.Fatalf("TUNE_ATTN_BWD=v99: got %v, want an error naming it", err)
	}
	t.Log(err)
}

// TestAttentionBwdV4MatchesV3 runs variant v4 (the D = 64 dK/dV kernel with two key tiles per warp and
// 32-query steps) on the kernel-test shapes with D = 64 on the tensor-core kernels: its MMAs add the same
// chunks in the same order as v3's, so dQ, dK and dV must equal v3's (as values: the sign of a zero may
// differ) and match the CPU reference.
func TestAttentionBwdV4MatchesV3(t *testing.T) {
	gpu := openOrSkip(t)
	ref := cpu.New()
	shapes := append(append([]attnShape{}, attnShapes...),
		attnShape{B: 2, Hq: 9, Hkv: 3, Tq: 320, Tk: 320, D: 64, causal: true},
		attnShape{B: 1, Hq: 2, Hkv: 2, Tq: 100, Tk: 300, D: 64, causal: true, p: 0.2},
		attnShape{B: 1, Hq: 4, Hkv: 4, Tq: 900, Tk: 900, D: 64, causal: true, keepBits: true, p: 0.1})
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
		for i, s := range shapes {
			if s.unaligned || s.D != 64 {
				continue
			}
			t.Run(dt.String()+"/"+s.String(), func(t *testing.T) {
				d := s.data(uint64(i + 1))
				restore := cuda.SetAttnBwdVariant("v3")
				v3 := runAttention(t, gpu, s, dt, d)
				restore()
				defer cuda.SetAttnBwdVariant("v4")()
				v4 := runAttention(t, gpu, s, dt, d)
				c := runAttention(t, ref, s, dt, d)
				tol := map[tensor.DType]float64{tensor.BF16: 2e-2, tensor.F16: 4e-3}[dt]
				closeTo(t, "dK", v4.dk, c.dk, 2*tol)
				closeTo(t, "dV", v4.dv, c.dv, 2*tol)
				for _, x := range []struct {
					name string
					a, b []float32
				}{{"dQ", v4.dq, v3.dq}, {"dK", v4.dk, v3.dk}, {"dV", v4.dv, v3.dv}} {
					for k := range x.a {
						if x.a[k] != x.b[k] {
							t.Fatalf("%s[%d] = %v with v4, %v with v3", x.name, k, x.a[k], x.b[k])
						}
					}
				}
			})
		}
	}
}

// TestAttentionBwdV5MatchesV2 runs the variants v5 and v6 (the D = 64 backward kernels of v2 and v3 compiled
// for three blocks per SM, fragments of the streamed tiles read from shared memory) and v7 (v3 with each step's
// tile in two halves; v8 with the dK/dV kernel in quarters; v9 and v10: v3 and v8 without the GQA split; v11: v8
// with three-stage rings; v12: v8 with the dK/dV kernel at four blocks per SM) on the kernel-test shapes with D = 64 on the tensor-core kernels: they do the same
// arithmetic in the same order, so dQ, dK and dV must be bit-identical to v2's (v5), v3's (v6 to v8, v11, v12) and v9's
// (v10; v9's dK and dV equal v2's, its dQ v3's), and from
// run to run.
func TestAttentionBwdV5MatchesV2(t *testing.T) {
	gpu := openOrSkip(t)
	ref := cpu.New()
	shapes := append(append([]attnShape{}, attnShapes...),
		attnShape{B: 2, Hq: 9, Hkv: 3, Tq: 320, Tk: 320, D: 64, causal: true},
		attnShape{B: 1, Hq: 2, Hkv: 2, Tq: 100, Tk: 300, D: 64, causal: true, p: 0.2},
		attnShape{B: 1, Hq: 4, Hkv: 4, Tq: 900, Tk: 900, D: 64, causal: true, keepBits: true, p: 0.1})
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
		for i, s := range shapes {
			if s.unaligned || s.D != 64 {
				continue
			}
			t.Run(dt.String()+"/"+s.String(), func(t *testing.T) {
				d := s.data(uint64(i + 1))
				run := func(v string) attnResult {
					defer cuda.SetAttnBwdVariant(v)()
					return runAttention(t, gpu, s, dt, d)
				}
				v2, v3, v5, v6, v6b, v7, v8 := run("v2"), run("v3"), run("v5"), run("v6"), run("v6"), run("v7"), run("v8")
				v9, v10, v11, v12 := run("v9"), run("v10"), run("v11"), run("v12")
				c := runAttention(t, ref, s, dt, d)
				tol := map[tensor.DType]float64{tensor.BF16: 2e-2, tensor.F16: 4e-3}[dt]
				closeTo(t, "v5 dQ", v5.dq, c.dq, 2*tol)
				closeTo(t, "v5 dK", v5.dk, c.dk, 2*tol)
				closeTo(t, "v5 dV", v5.dv, c.dv, 2*tol)
				closeTo(t, "v9 dK", v9.dk, c.dk, 2*tol)
				closeTo(t, "v9 dV", v9.dv, c.dv, 2*tol)
				// v9 is v3's dQ; without GQA its dK and dV are v3's too (with GQA they are the default's running
				// sum over the group, in another block order).
				same := []struct {
					name string
					a, b []float32
				}{{"v9 vs v3 dQ", v9.dq, v3.dq}, {"v9 vs v2 dK", v9.dk, v2.dk}, {"v9 vs v2 dV", v9.dv, v2.dv}}
				for _, y := range same {
					for k := range y.a {
						if math.Float32bits(y.a[k]) != math.Float32bits(y.b[k]) {
							t.Fatalf("%s[%d] = %v, then %v", y.name, k, y.a[k], y.b[k])
						}
					}
				}
				for _, x := range []struct {
					what string
					a, b attnResult
				}{{"v5 vs v2", v5, v2}, {"v6 vs v3", v6, v3}, {"v6 run to run", v6, v6b}, {"v7 vs v3", v7, v3}, {"v8 vs v3", v8, v3}, {"v10 vs v9", v10, v9}, {"v11 vs v3", v11, v3}, {"v12 vs v3", v12, v3}} {
					for _, y := range []struct {
						name string
						a, b []float32
					}{{"dQ", x.a.dq, x.b.dq}, {"dK", x.a.dk, x.b.dk}, {"dV", x.a.dv, x.b.dv}} {
						for k := range y.a {
							if math.Float32bits(y.a[k]) != math.Float32bits(y.b[k]) {
								t.Fatalf("%s: %s[%d] = %v, then %v", x.what, y.name, k, y.a[k], y.b[k])
							}
						}
					}
				}
			})
		}
	}
}
