// Package cuda is tune's NVIDIA GPU backend: every GEMM on cuBLASLt Tensor Cores, every other op a CUDA kernel
// compiled at run time with NVRTC. It needs the build tag cuda; without it Open returns an error wrapping
// tensor.ErrNoDevice that says the binary was built without CUDA support.
package cuda
