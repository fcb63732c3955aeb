package cpu

import (
	"fmt"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// BenchmarkGemm measures Backend.Gemm in GFLOP/s (2·batch·M·N·K per product) on a square product and on the
// products of one BERT-base training step at 2048 tokens (16 sequences of 128): the Linear layers compute
// y = x·Wᵀ with W stored (out, in), hence TransB; the attention scores are Q·Kᵀ per head and the context P·V.
// Besides GFLOP/s it reports the cores kept busy (CPU time / wall time) and GFLOP per CPU-second, which stay
// meaningful when other processes share the machine. Run: go test -run x -bench Gemm -benchtime 3x ./tensor/cpu
func BenchmarkGemm(b *testing.B) {
	cases := []gemmBenchCase{
		{"512x512x512/F32", tensor.F32, false, 1, 512, 512, 512},
		{"512x512x512/BF16", tensor.BF16, false, 1, 512, 512, 512},
		{"512x512x512_TransB/F32", tensor.F32, true, 1, 512, 512, 512},
		{"qkv_or_out_proj_2048x768x768/F32", tensor.F32, true, 1, 2048, 768, 768},
		{"ffn_up_2048x3072x768/F32", tensor.F32, true, 1, 2048, 3072, 768},
		{"ffn_down_2048x768x3072/F32", tensor.F32, true, 1, 2048, 768, 3072},
		{"ffn_up_2048x3072x768/BF16", tensor.BF16, true, 1, 2048, 3072, 768},
		{"attn_scores_12x128x128x64/F32", tensor.F32, true, 12, 128, 128, 64},
		{"attn_context_12x128x64x128/F32", tensor.F32, false, 12, 128, 64, 128},
	}
	bk := New()
	for _, path := range gemmPathsToTest() {
		b.Run(pathName(path), func(b *testing.B) {
			saved := gemmPath
			gemmPath = path
			defer func() { gemmPath = saved }()
			benchGemmCases(b, bk, cases)
		})
	}
}

// gemmBenchCase is one BenchmarkGemm shape.
type gemmBenchCase struct {
	name           string
	in             tensor.DType
	transB         bool
	batch, m, n, k int
}

func benchGemmCases(b *testing.B, bk *Backend, cases []gemmBenchCase) {
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ar, ac := c.m, c.k
			br, bc := c.k, c.n
			if c.transB {
				br, bc = c.n, c.k
			}
			A, B := benchTensor(b, bk, c.in, c.batch*ar*ac), benchTensor(b, bk, c.in, c.batch*br*bc)
			C := benchTensor(b, bk, c.in, c.batch*c.m*c.n)
			args := tensor.GemmArgs{TransB: c.transB, M: c.m, N: c.n, K: c.k, A: A, B: B, C: C, Batch: c.batch,
				StrideA: ar * ac, StrideB: br * bc, StrideC: c.m * c.n, Alpha: 1}
			cpu0 := processCPUTime()
			for b.Loop() {
				if err := bk.Gemm(args); err != nil {
					b.Fatal(err)
				}
			}
			cpu := (processCPUTime() - cpu0).Seconds()
			flops := 2 * float64(c.batch) * float64(c.m) * float64(c.n) * float64(c.k) * float64(b.N)
			b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			if cpu > 0 {
				// On a shared machine wall-clock GFLOP/s understates the kernel; these two say how many cores
				// the op kept busy and what it achieves per core-second actually received.
				b.ReportMetric(cpu/b.Elapsed().Seconds(), "cores")
				b.ReportMetric(flops/cpu/1e9, "GFLOP/cpu-s")
			}
		})
	}
}

func benchTensor(b *testing.B, bk *Backend, dt tensor.DType, n int) *tensor.Tensor {
	x, err := bk.Alloc(dt, n)
	if err != nil {
		b.Fatal(err)
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i%17)/17 - 0.5
	}
	if err := bk.Upload(x, v); err != nil {
		b.Fatal(fmt.Errorf("upload: %w", err))
	}
	return x
}

// BenchmarkGemmSmall compares the small-product path (gemm_small.go) with the packed AVX-512 GEMM on the products
// of a tiny-recipe training step (BERT hidden 64, intermediate 128, 640 tokens): the forward x·Wᵀ, the input
// gradient dY·W and the weight gradient dYᵀ·X. Run: go test -run x -bench GemmSmall ./tensor/cpu
func BenchmarkGemmSmall(b *testing.B) {
	if !hasSIMD || gemmPath == nil || gemmPath.name != "avx512" {
		b.Skip("the small path needs the AVX-512 kernels")
	}
	cases := []struct {
		name    string
		tA, tB  bool
		m, n, k int
	}{
		{"fwd_640x64x64", false, true, 640, 64, 64},
		{"fwd_640x128x64", false, true, 640, 128, 64},
		{"fwd_640x64x128", false, true, 640, 64, 128},
		{"dx_640x64x128", false, false, 640, 64, 128},
		{"dw_128x64x640", true, false, 128, 64, 640},
		{"dw_64x64x640", true, false, 64, 64, 640},
	}
	bk := New()
	for _, small := range []bool{true, false} {
		name := map[bool]string{true: "small", false: "packed"}[small]
		b.Run(name, func(b *testing.B) {
			defer func(s bool) { smallGemmOn = s }(smallGemmOn)
			smallGemmOn = small
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					ar, ac, br, bc := c.m, c.k, c.k, c.n
					if c.tA {
						ar, ac = c.k, c.m
					}
					if c.tB {
						br, bc = c.n, c.k
					}
					A, B := benchTensor(b, bk, tensor.F32, ar*ac), benchTensor(b, bk, tensor.F32, br*bc)
					C := benchTensor(b, bk, tensor.F32, c.m*c.n)
					args := tensor.GemmArgs{TransA: c.tA, TransB: c.tB, M: c.m, N: c.n, K: c.k, A: A, B: B, C: C, Alpha: 1}
					cpu0 := processCPUTime()
					for b.Loop() {
						if err := bk.Gemm(args); err != nil {
							b.Fatal(err)
						}
					}
					flops := 2 * float64(c.m*c.n*c.k) * float64(b.N)
					b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
					if cpu := (processCPUTime() - cpu0).Seconds(); cpu > 0 {
						b.ReportMetric(flops/cpu/1e9, "GFLOP/cpu-s")
					}
				})
			}
		})
	}
}
