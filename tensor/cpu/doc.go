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
// GEMM goes through gonum's pure-Go BLAS (gonum.org/v1/gonum/blas/gonum, Sgemm), which splits products into
// 64×64 blocks computed on GOMAXPROCS goroutines; batched products with small members are instead spread over
// goroutines one member each. Large row-wise ops (LayerNorm, softmax, GELU, ...) are split into fixed-size row
// chunks run in parallel; chunk boundaries do not depend on the core count, so results are reproducible
// bit for bit on any machine.
//
// Ops run synchronously; Synchronize is a no-op. In-place use (an output that is exactly one of the inputs)
// is supported by the elementwise and row-wise ops; partially overlapping arguments are not (tensor.Tensor).
package cpu
