//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// The kernels of simd_amd64.s (their comments there give the exact contracts).
//
//go:noescape
func sgemmSmallAVX512(m, n, k int, a *float32, rsa, csa int, b *float32, ldb int, c *float32, ldc int, alpha float32, acc bool)

//go:noescape
func expShiftSumAVX512(x *float32, n int, shift float32) float32

//go:noescape
func geluTableAVX512(out, x *float32, n int, table *float64) (outside bool)

//go:noescape
func geluBackwardTableAVX512(dx, dout, x *float32, n int, table *float64) (outside bool)

//go:noescape
func dropApply64AVX512(out, x *float32, wide *[64]uint32, threshold uint32, scale float32)

// hasSIMD says whether the AVX-512 kernels above may run (AVX-512 F and BW for the masks, BMI2 for PDEP;
// golang.org/x/sys/cpu also checks that the OS saves the ZMM registers). TUNE_CPU_GEMM=avx2|gonum turns them off
// too, so a forced path runs without any AVX-512 code.
var hasSIMD = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasBMI2

//go:noescape
func softmaxRowsAVX512(s *float32, rows, cols int, mask, f, mx, sum *float32)

//go:noescape
func softmaxBackRowsAVX512(p, dp, pd *float32, rows, cols int, mask, f, lse *float32)

//go:noescape
func layerNormStatsAVX512(x *float32, rows, cols int, mean, ss *float32)

//go:noescape
func layerNormApplyAVX512(out, x *float32, rows, cols int, mean, rstd, gamma, beta *float32)

//go:noescape
func layerNormBackAVX512(dx, dgamma, dbeta, dout, x, gamma, mean, rstd *float32, rows, cols int)

//go:noescape
func adamWAVX512(w, grad, m, v *float32, n int, h *[8]float32, decay bool)

//go:noescape
func addAVX512(out, a, b *float32, n int)

//go:noescape
func axpyAVX512(y, x *float32, n int, alpha float32)
