//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// The micro-kernels in sgemm_amd64.s; see microKernel for the contract.
//
//go:noescape
func sgemmKernelAVX512(kc int, a, b, c *float32, ldc int, alpha float32)

//go:noescape
func sgemmKernelAVX2(kc int, a, b, c *float32, ldc int, alpha float32)

var (
	avx512Kernel = &microKernel{name: "avx512", mr: 12, nr: 32, fn: sgemmKernelAVX512}
	avx2Kernel   = &microKernel{name: "avx2", mr: 6, nr: 16, fn: sgemmKernelAVX2}
)

// availableKernels lists the micro-kernels this processor can run, fastest first (golang.org/x/sys/cpu also
// checks that the OS saves the wider registers).
func availableKernels() []*microKernel {
	var ks []*microKernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, avx512Kernel)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, avx2Kernel)
	}
	return ks
}
