//go:build cuda

package cuda_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// TestF16PackMatchesHost checks the hardware FP16 rounding of the F16 kernels (f16x2_rn in common.cuh, used by
// elementwise.cu and norm.cu) against tensor.F32ToF16 through Cast (F32 → F16, aligned: the packed stores): every
// sign, exponent and leading 7 mantissa bits (the upper halves), each with low halves around the rounding points,
// their neighbours and two random ones. That covers FP16's subnormals and underflow, the largest finite values
// rounding to Inf, Inf and NaNs (whose payload rule is f32_to_f16's).
func TestF16PackMatchesHost(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	checkHalfCast(t, openOrSkip(t), tensor.F16, tensor.F32ToF16, func() []uint32 {
		return []uint32{0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x7FFF, 0x8000, 0xFFFF, rng.Uint32() & 0xFFFF, rng.Uint32() & 0xFFFF}
	})
}

// checkHalfCast casts, on gpu, every FP32 value whose upper half is any of the 2¹⁶ patterns and whose lower
// half is one of lows() (called once per upper half), plus a ragged tail, to dt and compares each result with
// want, the host's rounding.
func checkHalfCast(t *testing.T, gpu *cuda.Backend, dt tensor.DType, want func(float32) uint16, lows func() []uint32) {
	t.Helper()
	var in []float32
	for hi := range 1 << 16 {
		for _, lo := range lows() {
			in = append(in, math.Float32frombits(uint32(hi)<<16|lo))
		}
	}
	in = append(in, 1, 2, 3) // a ragged tail: the last elements go one by one
	x, err := gpu.Alloc(tensor.F32, len(in))
	must(t, err)
	defer gpu.Free(x)
	must(t, gpu.Upload(x, in))
	h, err := gpu.Alloc(dt, len(in))
	must(t, err)
	defer gpu.Free(h)
	must(t, gpu.Cast(h, x))
	got := make([]uint16, len(in))
	must(t, gpu.Download(got, h))
	bad := 0
	for i, v := range in {
		if w := want(v); got[i] != w {
			if bad++; bad <= 10 {
				t.Errorf("Cast to %v of %#08x: got %#04x, want %#04x", dt, math.Float32bits(v), got[i], w)
			}
		}
	}
	if bad > 10 {
		t.Errorf("%d values differ in all", bad)
	}
}

// TestHalfPackedStoresMatchOneByOne: the GELU ops with packed half stores (aligned views, constant dtypes)
// give every element the bits of the one-value-at-a-time path (the same data in a view one element off,
// which takes the generic kernels), for F16 and BF16, with NaN and Inf among the inputs.
func TestHalfPackedStoresMatchOneByOne(t *testing.T) {
	gpu := openOrSkip(t)
	const n, c = 96, 768
	for _, dt := range []tensor.DType{tensor.F16, tensor.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			xs, ds := make([]float32, n*c), make([]float32, n*c)
			for i := range xs {
				xs[i], ds[i] = float32(3*rng.NormFloat64()), float32(rng.NormFloat64()*1e3)
			}
			xs[7], xs[100], ds[300] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))
			run := func(off int) map[string][]uint16 {
				up := func(v []float32) *tensor.Tensor {
					buf, err := gpu.Alloc(dt, len(v)+off)
					must(t, err)
					t.Cleanup(func() { gpu.Free(buf) })
					must(t, gpu.Upload(buf, append(make([]float32, off), v...)))
					x, err := buf.View(off, n, c)
					must(t, err)
					return x
				}
				out := map[string][]uint16{}
				read := func(name string, x *tensor.Tensor) {
					h := make([]uint16, x.Numel())
					must(t, gpu.Download(h, x)) // the raw bits
					out[name] = h
				}
				x, d, y := up(xs), up(ds), up(make([]float32, n*c))
				must(t, gpu.GELU(y, x))
				read("GELU", y)
				g, dd := up(make([]float32, n*c)), up(ds)
				db, err := gpu.Alloc(dt, c)
				must(t, err)
				defer gpu.Free(db)
				must(t, gpu.GELUBackwardRecompute(dd, g, db, dd, x))
				read("GELUBackwardRecompute dx", dd)
				read("GELUBackwardRecompute out", g)
				must(t, gpu.GELUBackward(d, d, x))
				read("GELUBackward", d)
				return out
			}
			aligned, unaligned := run(0), run(1)
			if len(aligned) != 4 {
				t.Fatalf("%d outputs, want 4", len(aligned))
			}
			for name, a := range aligned {
				u := unaligned[name]
				if !slices.Equal(a, u) {
					for i := range a {
						if a[i] != u[i] {
							t.Fatalf("%s element %d: packed %#04x, one by one %#04x", name, i, a[i], u[i])
						}
					}
				}
			}
		})
	}
}
