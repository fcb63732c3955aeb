//go:build cuda

package cuda_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// thinCases are GEMMs that Gemm sends to kernels/thin.cu (cuda/thin.go): each path (K ≤ 16; N ≤ 16 with op(A) =
// A; op(A) = Aᵀ with M or N ≤ 16) at LoRA's shapes (4096 rows, 768 features, rank 8 and 16) and at odd ones
// (rows not a multiple of four, K not a multiple of eight, an odd L, a last K chunk of four rows, chunks of
// several 64-row pieces), both transposes of B, padded and unaligned views (the scalar load paths), beta 0 and
// ≠ 0, BF16 and F16 into a C of their type and F32.
func thinCases() []gemmCase {
	type shape struct {
		m, n, k        int
		transA, transB bool
	}
	shapes := []shape{
		{4096, 8, 768, false, true},   // h = x·Aᵀ
		{4096, 16, 768, false, true},  // the grouped h
		{4096, 8, 768, false, false},  // dh = dOut·B
		{4096, 768, 8, false, true},   // out += s·h·Bᵀ
		{4096, 768, 8, false, false},  // dIn += dh·A
		{768, 8, 4096, true, false},   // dB += s·dOutᵀ·h
		{8, 768, 4096, true, false},   // dA += dhᵀ·x
		{37, 3, 300, false, false},    // rowdot_4, a partial row group
		{45, 13, 1001, false, true},   // rowdot_16, K % 8 ≠ 0
		{19, 301, 5, true, true},      // smallk, transposed A, N % 128 ≠ 0
		{7, 6, 1, false, false},       // K = 1
		{301, 5, 4100, true, false},   // TN with an odd L, a four-row last chunk
		{3, 255, 9000, true, false},   // TN with 128-row chunks
		{16, 16, 17, true, false},     // TN at the thin limit
		{33, 2, 768, false, true},     // a classifier head
		{2, 768, 32, true, false},     // its weight gradient
		{32, 768, 2, false, false},    // its input gradient
		{130, 1030, 16, false, false}, // smallk at the limit
	}
	pairs := [][2]tensor.DType{{tensor.BF16, tensor.BF16}, {tensor.BF16, tensor.F32}, {tensor.F16, tensor.F16}, {tensor.F16, tensor.F32}}
	var out []gemmCase
	for i, s := range shapes {
		for j, p := range pairs {
			v := i + j
			c := gemmCase{ab: p[0], c: p[1], m: s.m, n: s.n, k: s.k, batch: 1, transA: s.transA, transB: s.transB}
			if v%2 == 1 {
				c.beta = 0.5
			}
			if v%3 == 1 {
				c.pad = 1 + v%4
			}
			if v%4 == 3 {
				c.offset = 3
			}
			out = append(out, c)
		}
	}
	return out
}

func TestGemmThinAgainstCPU(t *testing.T) {
	gpu := openOrSkip(t)
	defer cuda.SetGemmThin(true)()
	ref := cpu.New()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range thinCases() {
		t.Run(c.String(), func(t *testing.T) { runGemmCase(t, gpu, ref, rng, c) })
	}
}

// TestGemmThinIsDeterministic runs each thin path twice on the same inputs (C starting from the same values,
// beta ≠ 0) and wants the same bits: the kernels' summation order is fixed by the shape.
func TestGemmThinIsDeterministic(t *testing.T) {
	gpu := openOrSkip(t)
	defer cuda.SetGemmThin(true)()
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []gemmCase{
		{ab: tensor.BF16, c: tensor.F32, m: 768, n: 8, k: 4096, transA: true},
		{ab: tensor.BF16, c: tensor.F32, m: 8, n: 768, k: 4096, transA: true},
		{ab: tensor.BF16, c: tensor.BF16, m: 4096, n: 8, k: 768, transB: true},
		{ab: tensor.BF16, c: tensor.BF16, m: 4096, n: 768, k: 8, transB: true},
	} {
		ar, ac, br, bc := c.m, c.k, c.k, c.n
		if c.transA {
			ar, ac = c.k, c.m
		}
		if c.transB {
			br, bc = c.n, c.k
		}
		up := func(d tensor.DType, n int) (*tensor.Tensor, []float32) {
			v := make([]float32, n)
			for i := range v {
				v[i] = tensor.RoundTo(d, float32(rng.NormFloat64()))
			}
			x, err := gpu.Alloc(d, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := gpu.Upload(x, v); err != nil {
				t.Fatal(err)
			}
			return x, v
		}
		a, _ := up(c.ab, ar*ac)
		b, _ := up(c.ab, br*bc)
		cc, c0 := up(c.c, c.m*c.n)
		var first []float32
		for rep := 0; rep < 2; rep++ {
			if err := gpu.Upload(cc, c0); err != nil {
				t.Fatal(err)
			}
			if err := gpu.Gemm(tensor.GemmArgs{TransA: c.transA, TransB: c.transB, M: c.m, N: c.n, K: c.k, A: a, B: b, C: cc,
				Alpha: 0.5, Beta: 1, Batch: 1}); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, c.m*c.n)
			if err := gpu.Download(got, cc); err != nil {
				t.Fatal(err)
			}
			if rep == 0 {
				first = got
				continue
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
					t.Fatalf("%v: C[%d] = %v, then %v", c, i, first[i], got[i])
				}
			}
		}
		for _, x := range []*tensor.Tensor{a, b, cc} {
			gpu.Free(x)
		}
	}
}
