package cpu

import "math"

// The fast FP32 attention kernels: the reference's algorithm (attention.go: the same blocks of query rows, the
// same dropout factors from the same Philox elements, the same softmax, LSE and Δ definitions), with its
// primitives replaced by the AVX-512 kernels of simd_amd64.s. The products of a head are small (a BERT-tiny head
// is 20 × 20 × 16), so the packed GEMM's packing and edge tiles would cost more than the arithmetic; here every
// product goes through sgemmSmallAVX512, which reads its operands in place (K and V are transposed once per
// head so that Q·Kᵀ and dO·Vᵀ read rows), and exp is the vectorised Cephes expf (≤ 2 ulp; the reference rounds
// float64 math.Exp). The results differ from the reference's by FP32 rounding only (TestAttentionFastMatches
// Reference); like it they are deterministic (fixed order everywhere, one task per (batch, key/value head)).
// Half operands (P' and dS rounded to the half dtype) stay on the reference.

// attnFast reports whether the fast kernels compute a: FP32 operands and the AVX-512 kernels available.
func attnFast(a *attnProblem[float32]) bool { return hasSIMD && a.round == nil }

// sgemmSmall is c (+)= alpha·A·B for an m×k A read as a[i·rsa + p·csa], a k×n row-major B (row stride ldb)
// and an m×n C (row stride ldc); acc false overwrites C. Empty products do nothing.
func sgemmSmall(m, n, k int, a []float32, rsa, csa int, b []float32, ldb int, c []float32, ldc int, alpha float32, acc bool) {
	if m == 0 || n == 0 {
		return
	}
	_ = c[(m-1)*ldc+n-1] // bounds: the assembly checks nothing
	if k > 0 {
		_, _ = a[(m-1)*rsa+(k-1)*csa], b[(k-1)*ldb+n-1]
	}
	sgemmSmallAVX512(m, n, k, &a[0], rsa, csa, &b[0], ldb, &c[0], ldc, alpha, acc)
}

// transposeInto sets dst (cols × rows, row stride rows) to the transpose of the dense rows × cols src.
func transposeInto(dst, src []float32, rows, cols int) {
	dst = dst[:rows*cols]
	for i := 0; i < rows; i++ {
		row := src[i*cols : (i+1)*cols]
		for j, x := range row {
			dst[j*rows+i] = x
		}
	}
}

// scoresFast is rowScores for the common case without causal masking or segments: the key mask row added.
func (a *attnProblem[T]) scoresFast(s []T, b, i int) {
	if a.causal || a.seg != nil {
		a.rowScores(s, b, i)
		return
	}
	if a.mask != nil {
		m := a.mask[b*a.Tk : (b+1)*a.Tk]
		for j := range s {
			s[j] += T(m[j])
		}
	}
}

// expShift sets s[j] = exp(s[j] − shift) and returns Σ s[j].
func expShift(s []float32, shift float32) float32 {
	if len(s) == 0 {
		return 0
	}
	return expShiftSumAVX512(&s[0], len(s), shift)
}

// attnForwardFast is attnForwardKernel (same contract) with the fast primitives.
func attnForwardFast(a *attnProblem[float32], o, lse, q, k, v []float32) {
	if a.Tk == 0 {
		clear(o)
		for i := range lse {
			lse[i] = float32(math.Inf(-1))
		}
		return
	}
	m, D, Tk := min(a.Tq, attnBlock), a.D, a.Tk
	parallelFor(a.B*a.Hq, a.Tq*Tk*D*2, func(lo, hi int) {
		var sc scratch
		defer sc.release()
		sb, fb, kt := sc.get(m*Tk), sc.get(m*Tk), sc.get(D*Tk)
		lastK := -1
		for bh := lo; bh < hi; bh++ {
			b, h := bh/a.Hq, bh%a.Hq
			qo, ko := a.heads(b, h)
			if ko != lastK { // grouped query heads share K
				transposeInto(kt, k[ko:], Tk, D)
				lastK = ko
			}
			for i0 := 0; i0 < a.Tq; i0 += m {
				n := min(m, a.Tq-i0)
				sgemmSmall(n, Tk, D, q[qo+i0*D:], D, 1, kt, Tk, sb, Tk, a.scale, false)
				if a.p != 0 {
					a.dropBlock(fb, b, h, i0, n)
				}
				for r := 0; r < n; r++ {
					i, s := i0+r, sb[r*Tk:(r+1)*Tk]
					a.scoresFast(s, b, i)
					mx := float32(math.Inf(-1))
					for _, x := range s {
						mx = max(mx, x)
					}
					if math.IsInf(float64(mx), -1) {
						lse[bh*a.Tq+i] = mx
						clear(s)
						continue
					}
					sum := expShift(s, mx)
					lse[bh*a.Tq+i] = mx + float32(math.Log(float64(sum)))
					inv := 1 / sum
					if a.p == 0 {
						for j, e := range s {
							s[j] = e * inv
						}
						continue
					}
					f := fb[r*Tk : (r+1)*Tk]
					for j, e := range s {
						s[j] = e * inv * f[j]
					}
				}
				sgemmSmall(n, D, Tk, sb, Tk, 1, v[ko:], D, o[qo+i0*D:], D, 1, false)
			}
		}
	})
}

// attnBackwardFast is attnBackwardKernel (same contract) with the fast primitives.
func attnBackwardFast(a *attnProblem[float32], dq, dk, dv, q, k, v, o, lse, dout []float32) {
	if a.Tk == 0 {
		clear(dq)
		return
	}
	g, m, D, Tk := a.Hq/a.Hkv, min(a.Tq, attnBlock), a.D, a.Tk
	parallelFor(a.B*a.Hkv, g*a.Tq*Tk*D*4, func(lo, hi int) {
		var sc scratch
		defer sc.release()
		sb, db, pb, fb := sc.get(m*Tk), sc.get(m*Tk), sc.get(m*Tk), sc.get(m*Tk)
		kt, vt := sc.get(D*Tk), sc.get(D*Tk)
		for bk := lo; bk < hi; bk++ {
			b, kh := bk/a.Hkv, bk%a.Hkv
			ko := bk * Tk * D
			dkh, dvh := dk[ko:ko+Tk*D], dv[ko:ko+Tk*D]
			clear(dkh)
			clear(dvh)
			transposeInto(kt, k[ko:], Tk, D)
			transposeInto(vt, v[ko:], Tk, D)
			for h := kh * g; h < (kh+1)*g; h++ {
				qo, _ := a.heads(b, h)
				for i0 := 0; i0 < a.Tq; i0 += m {
					n := min(m, a.Tq-i0)
					sgemmSmall(n, Tk, D, q[qo+i0*D:], D, 1, kt, Tk, sb, Tk, a.scale, false)
					sgemmSmall(n, Tk, D, dout[qo+i0*D:], D, 1, vt, Tk, db, Tk, 1, false)
					if a.p != 0 {
						a.dropBlock(fb, b, h, i0, n)
					}
					for r := 0; r < n; r++ {
						i := i0 + r
						p, dp, pd := sb[r*Tk:(r+1)*Tk], db[r*Tk:(r+1)*Tk], pb[r*Tk:(r+1)*Tk]
						l := lse[(b*a.Hq+h)*a.Tq+i]
						if math.IsInf(float64(l), -1) { // no allowed key: no gradient
							clear(pd)
							clear(dp)
							continue
						}
						a.scoresFast(p, b, i)
						expShift(p, l) // forbidden keys (−Inf) give P = 0
						if a.p != 0 {
							f := fb[r*Tk : (r+1)*Tk]
							for j := range dp {
								dp[j] *= f[j]
							}
						}
						var delta float32
						for j, x := range p {
							if x != 0 { // as the reference, which skips forbidden keys (0·Inf would be NaN)
								delta += x * dp[j]
							}
						}
						if a.p != 0 {
							f := fb[r*Tk : (r+1)*Tk]
							for j, x := range p {
								pd[j] = x * f[j]
							}
						} else {
							copy(pd, p)
						}
						for j, x := range p {
							dp[j] = x * (dp[j] - delta) // dS
						}
					}
					sgemmSmall(Tk, D, n, pb, 1, Tk, dout[qo+i0*D:], D, dvh, D, 1, true)
					sgemmSmall(n, D, Tk, db, Tk, 1, k[ko:], D, dq[qo+i0*D:], D, a.scale, false)
					sgemmSmall(Tk, D, n, db, 1, Tk, q[qo+i0*D:], D, dkh, D, a.scale, true)
				}
			}
		}
	})
}
