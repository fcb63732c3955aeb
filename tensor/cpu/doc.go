// Package cpu is tune's pure-Go reference backend: every tensor.Backend op, forward and backward, written for
// clarity and used as the numerical oracle for the CUDA backend.
//
// Importing the package registers it as "cpu" (tensor.RegisterBackend); New opens it directly:
//
//	b := cpu.New()
//	x, _ := b.Alloc(tensor.BF16, 4, 768)
//	_ = b.Upload(x, hostValues) // []float32, rounded to BF16 (round-to-nearest-even)
//	_ = b.GELU(x, x)            // computed in FP32, rounded to BF16 on store
//
// Storage: F32 tensors live in []float32, F16 and BF16 in []uint16 holding the raw bits, I32 in []int32 and
// I64 in []int64. A tensor is a view (Offset, Shape) into one such buffer. Every op loads its floating-point
// inputs to FP32 (F32 storage is read in place, half storage is widened exactly into scratch), computes in FP32
// and rounds each output to its own dtype once on store, as the GPU does. Outputs documented as "+=" are read
// in FP32, accumulated and rounded once.
//
// The numeric kernels are generic over float32 and float64 (kernel[T float32 | float64]): the backend runs the
// float32 instantiation, and the package's gradient checks run the float64 one against central finite
// differences, so the code that is checked is the code that runs.
//
// FP32 GEMM is a packed, blocked GEMM with AVX-512 or AVX2 micro-kernels chosen at run time (sgemm.go;
// TUNE_CPU_GEMM=avx512|avx2|gonum forces one, gonum's pure-Go Sgemm is the fallback); float64 uses gonum's Dgemm.
// Where the processor has AVX-512 (F, BW) and BMI2 and the avx512 path is selected, the small ops of a small
// model also have assembly kernels (simd_amd64.s): an unpacked GEMM for products whose B fits L2
// (gemm_small.go), a fast FP32 fused attention (attention_fast.go, beside the reference in attention.go),
// GELU, dropout, LayerNorm and BiasGrad. Each is tested against the scalar or float64 kernel it replaces; the
// GELU and dropout kernels give the same bits, the others differ by FP32 rounding (sums in another order, an
// exp of ≤ 2 ulp). Large row-wise ops are split into fixed-size row chunks run in parallel; chunk boundaries do
// not depend on the core count, and every element of a GEMM is summed by one task in a fixed order, so results
// are reproducible bit for bit on any core count.
//
// Ops run synchronously; Synchronize is a no-op. In-place use (an output that is exactly one of the inputs)
// is supported by the elementwise and row-wise ops; partially overlapping arguments are not (tensor.Tensor).
package cpu
