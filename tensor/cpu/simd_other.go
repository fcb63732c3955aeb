//go:build !amd64 || purego

package cpu

// Without the AVX-512 kernels of simd_amd64.s these are never called (hasSIMD is false).

var hasSIMD = false

func sgemmSmallAVX512(m, n, k int, a *float32, rsa, csa int, b *float32, ldb int, c *float32, ldc int, alpha float32, acc bool) {
	panic("unreachable")
}

func expShiftSumAVX512(x *float32, n int, shift float32) float32 { panic("unreachable") }

func geluTableAVX512(out, x *float32, n int, table *float64) bool { panic("unreachable") }

func geluBackwardTableAVX512(dx, dout, x *float32, n int, table *float64) bool { panic("unreachable") }

func dropApply64AVX512(out, x *float32, wide *[64]uint32, threshold uint32, scale float32) {
	panic("unreachable")
}

func softmaxRowsAVX512(s *float32, rows, cols int, mask, f, mx, sum *float32) { panic("unreachable") }

func softmaxBackRowsAVX512(p, dp, pd *float32, rows, cols int, mask, f, lse *float32) {
	panic("unreachable")
}

func layerNormStatsAVX512(x *float32, rows, cols int, mean, ss *float32) { panic("unreachable") }

func layerNormApplyAVX512(out, x *float32, rows, cols int, mean, rstd, gamma, beta *float32) {
	panic("unreachable")
}

func layerNormBackAVX512(dx, dgamma, dbeta, dout, x, gamma, mean, rstd *float32, rows, cols int) {
	panic("unreachable")
}

func adamWAVX512(w, grad, m, v *float32, n int, h *[8]float32, decay bool) { panic("unreachable") }

func addAVX512(out, a, b *float32, n int) { panic("unreachable") }

func axpyAVX512(y, x *float32, n int, alpha float32) { panic("unreachable") }
