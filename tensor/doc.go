// Package tensor is tune's tensor core: the element types (DType, with exact FP16/BF16 conversions), the Tensor
// view (shape, dtype, backend buffer, offset), the Backend interface that holds the whole op set forward and
// backward, the Philox 4x32-10 generator that makes dropout masks identical on every backend, and typed errors
// (*OpError wrapping ErrShape, ErrDType, ...).
//
// Simplest use, with the CPU reference backend:
//
//	b := cpu.New()
//	x, _ := b.Alloc(tensor.F32, 2, 3)
//	_ = b.Upload(x, []float32{1, 2, 3, 4, 5, 6})
//	y, _ := b.Alloc(tensor.BF16, 2, 3)
//	_ = b.GELU(y, x) // computed in FP32, rounded to BF16 on store
//
// Backends register themselves (RegisterBackend) so that tests written once run on each compiled backend
// through tensortest.ForEachBackend.
package tensor
