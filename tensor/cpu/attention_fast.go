package cpu

import (
	"math"

	"github.com/tune-ml/tune/internal/opcheck"
)

// The fast FP32 attention kernels: the reference's algorithm (attention.go: the same blocks of query rows, the
// same dropout factors from the same Philox elements, the same softmax, LSE and Δ definitions), with its
// primitives replaced by the AVX-512 kernels of simd_amd64.s. The products of a head are small (a BERT-tiny head
// is 20 × 20 × 16), so the packed GEMM's packing and edge tiles would cost more than the arithmetic; here every
// product goes through sgemmSmallAVX512 on the operands in their own strided layouts (no gather or scatter; K
// and V are transposed once per head so that Q·Kᵀ and dO·Vᵀ read rows), and without causal masking or segments
// a block's softmax (softmaxRowsAVX512) and its backward (softmaxBackRowsAVX512) are one call each, with the
// vectorised Cephes expf (≤ 2 ulp; the reference rounds float64 math.Exp). The results differ from the
// reference's by FP32 rounding only (TestAttentionFastMatchesReference); like it they are deterministic (fixed
// order everywhere, one task per (batch, key/value head)). Half operands (P' and dS rounded to the half dtype)
// stay on the reference.

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

// maskRow returns batch member b's key mask row, or nil without a mask.
func (a *attnProblem[T]) maskRow(b int) *float32 {
	if a.mask == nil {
		return nil
	}
	return &a.mask[b*a.Tk]
}

// expShift sets s[j] = exp(s[j] − shift) and returns Σ s[j].
func expShift(s []float32, shift float32) float32 {
	if len(s) == 0 {
		return 0
	}
	return expShiftSumAVX512(&s[0], len(s), shift)
}

// attnView is an FP32 operand read or written in place: element (b, h, t, d) at v[b·sb + h·sh + t·st + d].
type attnView struct {
	v          []float32
	sb, sh, st int
}

// at returns the slice from row t of head h of batch member b.
func (x attnView) at(b, h, t int) []float32 { return x.v[b*x.sb+h*x.sh+t*x.st:] }

// denseView is the view of a dense (B, H, T, D) slice.
func denseView(v []float32, h, t, d int) attnView { return attnView{v, h * t * d, t * d, d} }

// viewOf is the view of an F32 operand in its own layout.
func viewOf(x opcheck.AttnOperand) attnView { return attnView{f32Of(x.T), x.SB, x.SH, x.ST} }

// transposeRows sets dst (cols × rows, row stride rows) to the transpose of rows × cols src with row stride ld.
func transposeRows(dst, src []float32, rows, cols, ld int) {
	dst = dst[:rows*cols]
	for i := 0; i < rows; i++ {
		row := src[i*ld : i*ld+cols]
		for j, x := range row {
			dst[j*rows+i] = x
		}
	}
}

// attnForwardFast is attnForwardKernel (same contract) with the fast primitives, reading Q, K, V and writing O
// in their own layouts (no gather or scatter; the outputs must not overlap the inputs, as for the CUDA kernel).
func attnForwardFast(a *attnProblem[float32], o attnView, lse []float32, q, k, v attnView) {
	if a.Tk == 0 {
		for bh := 0; bh < a.B*a.Hq; bh++ {
			for t := 0; t < a.Tq; t++ {
				clear(o.at(bh/a.Hq, bh%a.Hq, t)[:a.D])
			}
		}
		for i := range lse {
			lse[i] = float32(math.Inf(-1))
		}
		return
	}
	m, D, Tk, g := min(a.Tq, attnBlock), a.D, a.Tk, a.Hq/a.Hkv
	parallelFor(a.B*a.Hq, a.Tq*Tk*D*2, func(lo, hi int) {
		var sc scratch
		defer sc.release()
		sb, fb, kt := sc.get(m*Tk), sc.get(m*Tk), sc.get(D*Tk)
		mb, sums := sc.get(m), sc.get(m)
		rowsAsm := !a.causal && a.seg == nil // the whole block's softmax in one call
		var fp *float32
		if a.p != 0 {
			fp = &fb[0]
		}
		lastK := -1
		for bh := lo; bh < hi; bh++ {
			b, h := bh/a.Hq, bh%a.Hq
			if kh := b*a.Hkv + h/g; kh != lastK { // grouped query heads share K
				transposeRows(kt, k.at(b, h/g, 0), Tk, D, k.st)
				lastK = kh
			}
			for i0 := 0; i0 < a.Tq; i0 += m {
				n := min(m, a.Tq-i0)
				sgemmSmall(n, Tk, D, q.at(b, h, i0), q.st, 1, kt, Tk, sb, Tk, a.scale, false)
				if a.p != 0 {
					a.dropBlock(fb, b, h, i0, n)
				}
				if rowsAsm {
					softmaxRowsAVX512(&sb[0], n, Tk, a.maskRow(b), fp, &mb[0], &sums[0])
					for r := 0; r < n; r++ {
						if l := &lse[bh*a.Tq+i0+r]; math.IsInf(float64(mb[r]), -1) {
							*l = mb[r]
							clear(sb[r*Tk : (r+1)*Tk])
						} else {
							*l = mb[r] + float32(math.Log(float64(sums[r])))
						}
					}
				}
				for r := 0; r < n && !rowsAsm; r++ {
					i, s := i0+r, sb[r*Tk:(r+1)*Tk]
					a.rowScores(s, b, i)
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
				sgemmSmall(n, D, Tk, sb, Tk, 1, v.at(b, h/g, 0), v.st, o.at(b, h, i0), o.st, 1, false)
			}
		}
	})
}

// attnBackwardFast is attnBackwardKernel (same contract) with the fast primitives, in the operands' own layouts
// as attnForwardFast.
func attnBackwardFast(a *attnProblem[float32], dq, dk, dv, q, k, v attnView, lse []float32, dout attnView) {
	if a.Tk == 0 {
		for bh := 0; bh < a.B*a.Hq; bh++ {
			for t := 0; t < a.Tq; t++ {
				clear(dq.at(bh/a.Hq, bh%a.Hq, t)[:a.D])
			}
		}
		return
	}
	g, m, D, Tk := a.Hq/a.Hkv, min(a.Tq, attnBlock), a.D, a.Tk
	parallelFor(a.B*a.Hkv, g*a.Tq*Tk*D*4, func(lo, hi int) {
		var sc scratch
		defer sc.release()
		sb, db, pb, fb := sc.get(m*Tk), sc.get(m*Tk), sc.get(m*Tk), sc.get(m*Tk)
		kt, vt := sc.get(D*Tk), sc.get(D*Tk)
		rowsAsm := !a.causal && a.seg == nil
		var fp *float32
		if a.p != 0 {
			fp = &fb[0]
		}
		for bk := lo; bk < hi; bk++ {
			b, kh := bk/a.Hkv, bk%a.Hkv
			for t := 0; t < Tk; t++ {
				clear(dk.at(b, kh, t)[:D])
				clear(dv.at(b, kh, t)[:D])
			}
			dkh, dvh := dk.at(b, kh, 0), dv.at(b, kh, 0)
			transposeRows(kt, k.at(b, kh, 0), Tk, D, k.st)
			transposeRows(vt, v.at(b, kh, 0), Tk, D, v.st)
			for h := kh * g; h < (kh+1)*g; h++ {
				for i0 := 0; i0 < a.Tq; i0 += m {
					n := min(m, a.Tq-i0)
					qi, doi := q.at(b, h, i0), dout.at(b, h, i0)
					sgemmSmall(n, Tk, D, qi, q.st, 1, kt, Tk, sb, Tk, a.scale, false)
					sgemmSmall(n, Tk, D, doi, dout.st, 1, vt, Tk, db, Tk, 1, false)
					if a.p != 0 {
						a.dropBlock(fb, b, h, i0, n)
					}
					if rowsAsm {
						softmaxBackRowsAVX512(&sb[0], &db[0], &pb[0], n, Tk, a.maskRow(b), fp, &lse[(b*a.Hq+h)*a.Tq+i0])
					}
					for r := 0; r < n && !rowsAsm; r++ {
						i := i0 + r
						p, dp, pd := sb[r*Tk:(r+1)*Tk], db[r*Tk:(r+1)*Tk], pb[r*Tk:(r+1)*Tk]
						l := lse[(b*a.Hq+h)*a.Tq+i]
						if math.IsInf(float64(l), -1) { // no allowed key: no gradient
							clear(pd)
							clear(dp)
							continue
						}
						a.rowScores(p, b, i)
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
					sgemmSmall(Tk, D, n, pb, 1, Tk, doi, dout.st, dvh, dv.st, 1, true)
					sgemmSmall(n, D, Tk, db, Tk, 1, k.at(b, kh, 0), k.st, dq.at(b, h, i0), dq.st, a.scale, false)
					sgemmSmall(Tk, D, n, db, 1, Tk, qi, q.st, dkh, dk.st, a.scale, true)
				}
			}
		}
	})
}
