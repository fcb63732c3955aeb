//go:build cuda

package cuda_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// f32Shape is one true-FP32 GEMM of BERT-base's training step at batch 64 × seq 512 (32768 tokens), in the
// row-major terms of tensor.GemmArgs, with its leading dimensions and batch strides (0: dense).
type f32Shape struct {
	name           string
	m, n, k, batch int
	transA, transB bool
	lda, ldb, ldc  int
	sa, sb, sc     int
	bias           bool
	alpha          float32
}

// bertF32Shapes lists the step's GEMMs: the Linear layers' forward (X·Wᵀ + b), input gradient (dY·W) and
// weight gradient (dYᵀ·X) — query, key and value as one 2304-wide stack (transformer.LinearStack) — and the FP32 attention path's per-head products over the 64 batch members (Q, K,
// V, O rows 768 floats apart; scores 512 × 512 in the scratch), as cuda/attention_f32.go issues them.
func bertF32Shapes() []f32Shape {
	const T, H, D, B, M = 512, 768, 64, 64, 32768
	var out []f32Shape
	for _, l := range [][2]int{{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}} { // (in, out): QKV stack, attention output, FFN
		in, o := l[0], l[1]
		out = append(out,
			f32Shape{name: fmt.Sprintf("fwd_%dx%dx%d", M, o, in), m: M, n: o, k: in, transB: true, bias: true, alpha: 1},
			f32Shape{name: fmt.Sprintf("dX_%dx%dx%d", M, in, o), m: M, n: in, k: o, alpha: 1},
			f32Shape{name: fmt.Sprintf("dW_%dx%dx%d", o, in, M), m: o, n: in, k: M, transA: true, alpha: 1})
	}
	s := T * H // batch stride of Q, K, V, O, dO (B, T, H·D)
	out = append(out,
		f32Shape{name: "attn_S=QKt_64x(512x512x64)", m: T, n: T, k: D, batch: B, transB: true, lda: H, ldb: H, ldc: T, sa: s, sb: s, sc: T * T, alpha: 0.125},
		f32Shape{name: "attn_O=PV_64x(512x64x512)", m: T, n: D, k: T, batch: B, lda: T, ldb: H, ldc: H, sa: T * T, sb: s, sc: s, alpha: 1},
		f32Shape{name: "attn_dV=PtdO_64x(512x64x512)", m: T, n: D, k: T, batch: B, transA: true, lda: T, ldb: H, ldc: H, sa: T * T, sb: s, sc: s, alpha: 1})
	return out
}

// BenchmarkGemmF32 times each true-FP32 GEMM of bertF32Shapes with CUDA events under the default kernel choice
// (cuda/gemmf32.go: cublasSgemm for the unbatched products without a bias, cuBLASLt for the rest) and under
// "lt" (cuBLASLt for all, TUNE_GEMM_F32=lt), and reports µs/gemm and TFLOP/s (2·M·N·K·batch).
// tools/reference/bench_gemm_f32.py times PyTorch on the same shapes. With TUNE_GEMMBENCH_ONCE=1 each GEMM
// runs once, untimed, so that a kernel profiler (ncu) names the kernels in launch order. Run with
// -test.benchtime=10x.
func BenchmarkGemmF32(b *testing.B) {
	gpu := openOrSkip(b)
	once := os.Getenv("TUNE_GEMMBENCH_ONCE") == "1"
	rng := rand.New(rand.NewPCG(7, 8))
	pattern := make([]float32, 1<<20+7) // random values, repeated over the operands (generating 10⁸ takes seconds)
	for i := range pattern {
		pattern[i] = float32(rng.NormFloat64())
	}
	for _, s := range bertF32Shapes() {
		batch := max(s.batch, 1)
		ar, ac, br, bc := s.m, s.k, s.k, s.n
		if s.transA {
			ar, ac = s.k, s.m
		}
		if s.transB {
			br, bc = s.n, s.k
		}
		size := func(rows, cols, ld, stride int) int {
			if ld == 0 {
				ld = cols
			}
			if stride == 0 {
				stride = rows * ld
			}
			return (batch-1)*stride + (rows-1)*ld + cols
		}
		alloc := func(n int) *tensor.Tensor {
			x, err := gpu.Alloc(tensor.F32, n)
			if err != nil {
				b.Fatal(err)
			}
			v := make([]float32, n)
			for i := 0; i < n; i += len(pattern) {
				copy(v[i:], pattern)
			}
			if err := gpu.Upload(x, v); err != nil {
				b.Fatal(err)
			}
			return x
		}
		A, B, C := alloc(size(ar, ac, s.lda, s.sa)), alloc(size(br, bc, s.ldb, s.sb)), alloc(size(s.m, s.n, s.ldc, s.sc))
		args := tensor.GemmArgs{TransA: s.transA, TransB: s.transB, M: s.m, N: s.n, K: s.k, A: A, B: B, C: C,
			LDA: s.lda, LDB: s.ldb, LDC: s.ldc, Batch: s.batch, StrideA: s.sa, StrideB: s.sb, StrideC: s.sc, Alpha: s.alpha}
		if s.bias {
			args.Bias = alloc(s.n)
		}
		for _, rule := range []string{"default", "lt"} {
			b.Run(s.name+"/"+rule, func(b *testing.B) {
				defer cuda.SetGemmF32Lt(rule == "lt")()
				if once {
					if err := gpu.Gemm(args); err != nil {
						b.Fatal(err)
					}
					if err := gpu.Synchronize(); err != nil {
						b.Fatal(err)
					}
					return
				}
				med := medianMs(b, gpu, 3, func() error { return gpu.Gemm(args) })
				flops := 2 * float64(s.m) * float64(s.n) * float64(s.k) * float64(batch)
				b.ReportMetric(med*1e3, "µs/gemm")
				b.ReportMetric(flops/(med*1e-3)/1e12, "TFLOP/s")
			})
		}
		for _, x := range []*tensor.Tensor{A, B, C, args.Bias} {
			if x != nil {
				gpu.Free(x)
			}
		}
	}
}
