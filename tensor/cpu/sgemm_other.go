//go:build !amd64 || purego

package cpu

// availableKernels: no assembly micro-kernel on this architecture; FP32 GEMM uses gonum's pure-Go Sgemm.
func availableKernels() []*microKernel { return nil }
