//go:build cuda

package cuda_test

import (
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// BenchmarkGemm times cuBLASLt GEMMs with CUDA events and reports the median time per GEMM and the TFLOP/s
// it gives (2·M·N·K·batch flops). Inputs are random (zeros run faster on Tensor Cores) and a warm-up call
// chooses the algorithm first. Shapes: the square 4096³ products in bf16, fp16 and true fp32, and
// BERT-base's per-step GEMMs at batch 32 × seq 128 (4096 tokens) and the FFN at 64 × 512 (32768 tokens), in
// bf16 with the nn.Linear layout (weights (out, in), so TransB), and LoRA r=8's rank-8 products at 4096 rows.
// Run with -test.benchtime=50x.
func BenchmarkGemm(b *testing.B) {
	cases := []struct {
		name           string
		dt             tensor.DType
		m, n, k, batch int
		transA, transB bool
	}{
		{"bf16 4096x4096x4096", tensor.BF16, 4096, 4096, 4096, 1, false, false},
		{"fp16 4096x4096x4096", tensor.F16, 4096, 4096, 4096, 1, false, false},
		{"fp32 4096x4096x4096", tensor.F32, 4096, 4096, 4096, 1, false, false},
		{"bert 32x128 qkv 4096x2304x768", tensor.BF16, 4096, 2304, 768, 1, false, true},
		{"bert 32x128 attn-out 4096x768x768", tensor.BF16, 4096, 768, 768, 1, false, true},
		{"bert 32x128 ffn-up 4096x3072x768", tensor.BF16, 4096, 3072, 768, 1, false, true},
		{"bert 32x128 ffn-down 4096x768x3072", tensor.BF16, 4096, 768, 3072, 1, false, true},
		{"bert 32x128 dW ffn-up 3072x768x4096", tensor.BF16, 3072, 768, 4096, 1, true, false},
		{"bert 32x128 scores 384x(128x128x64)", tensor.BF16, 128, 128, 64, 384, false, true},
		{"bert 32x128 context 384x(128x64x128)", tensor.BF16, 128, 64, 128, 384, false, false},
		{"bert 64x512 ffn-up 32768x3072x768", tensor.BF16, 32768, 3072, 768, 1, false, true},
		{"bert 64x512 scores 768x(512x512x64)", tensor.BF16, 512, 512, 64, 768, false, true},
		{"lora r8 h 4096x8x768", tensor.BF16, 4096, 8, 768, 1, false, true},
		{"lora r8 out 4096x768x8", tensor.BF16, 4096, 768, 8, 1, false, true},
		{"lora r8 dh 4096x8x768", tensor.BF16, 4096, 8, 768, 1, false, false},
		{"lora r8 dIn 4096x768x8", tensor.BF16, 4096, 768, 8, 1, false, false},
		{"lora r8 dB 768x8x4096", tensor.BF16, 768, 8, 4096, 1, true, false},
		{"lora r8 dA 8x768x4096", tensor.BF16, 8, 768, 4096, 1, true, false},
	}
	gpu := openOrSkip(b)
	rng := rand.New(rand.NewPCG(5, 6))
	random := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			alloc := func(dt tensor.DType, n int) *tensor.Tensor {
				x, err := gpu.Alloc(dt, n)
				if err != nil {
					b.Fatal(err)
				}
				if err := gpu.Upload(x, random(n)); err != nil {
					b.Fatal(err)
				}
				return x
			}
			A, B, C := alloc(c.dt, c.batch*c.m*c.k), alloc(c.dt, c.batch*c.k*c.n), alloc(c.dt, c.batch*c.m*c.n)
			defer gpu.Free(A)
			defer gpu.Free(B)
			defer gpu.Free(C)
			args := tensor.GemmArgs{TransA: c.transA, TransB: c.transB, M: c.m, N: c.n, K: c.k, A: A, B: B, C: C,
				Batch: c.batch, StrideA: c.m * c.k, StrideB: c.k * c.n, StrideC: c.m * c.n, Alpha: 1}
			med := medianMs(b, gpu, 3, func() error { return gpu.Gemm(args) })
			flops := 2 * float64(c.m) * float64(c.n) * float64(c.k) * float64(c.batch)
			b.ReportMetric(med*1e3, "µs/gemm")
			b.ReportMetric(flops/(med*1e-3)/1e12, "TFLOP/s")
			_, staged := gpu.GemmStats()
			if staged != 0 {
				b.Logf("%s: %d GEMMs took the staged path", c.name, staged)
			}
		})
	}
}
