//go:build cuda

package cuda

import (
	"github.com/tune-ml/tune/internal/opcheck"
)

// The 3xTF32 form of the FP32 attention path (TUNE_ATTN_F32=x3): the same chunks, row kernels and order of
// sums as attention_f32.go, but every product runs on TF32 tensor cores as CUTLASS's OpMultiplyAddFastF32
// does (the kernel PyTorch's memory-efficient attention uses for FP32 on sm_80+): each FP32 operand x is split
// into TF32 values hi = rn(x) and lo = rn(x − hi), and X·Y ≈ Xlo·Yhi + Xhi·Ylo + Xhi·Yhi (the dropped lo·lo
// term is 2⁻²² relative), accumulated in FP32. Products over D (S = Q·Kᵀ, dP' = dO·Vᵀ) are one TF32 GEMM over
// 3·D columns of [hi | lo | hi]·[hi | hi | lo]ᵀ operand copies (attn_f32_split3); products over keys or
// queries (P'·V, P'ᵀ·dO, dS·K, dSᵀ·Q) are three TF32 GEMMs into the same FP32 output (beta 1 after the first),
// reading the hi and lo parts of P' and dS that the row kernels write.

// x3Split queues attn_f32_split3: the 3xTF32 copy of rows rows of nj jobs of x (first element e, job stride
// js) into dst.
func (o *op) x3Split(dst uint64, x opcheck.AttnOperand, e, js, rows, d, nj, lopos int) {
	n := nj * rows * d
	o.launch("attention_f32.cu", "attn_f32_split3", o.gridFor(n), 1, 256, 1, dst, f32Elem(x, e), i64(js), i64(x.ST), i64(rows), i64(d), i64(nj), i64(lopos))
}

// x3Sum queues C = beta·C + alpha·(A_lo·B_1 + A_hi·B_2 + A_hi·B_3) as three TF32 GEMMs of mm's geometry
// (a[i], b[i] the operands of term i); it reports false when cuBLASLt has no algorithm.
func (o *op) x3Sum(mm matmul, a, b [3]uint64, beta float32) bool {
	mm.tf32 = true
	for i := range a {
		mm.a, mm.b, mm.beta = a[i], b[i], beta
		if !o.f32Gemm(mm) {
			return false
		}
		beta = 1
	}
	return true
}

// attnX3Forward is attnF32Forward with 3xTF32 products.
func (o *op) attnX3Forward(g opcheck.Attention) bool {
	D := g.D
	c := f32Plan(g, 2, 3*D, 6*D) // P' hi and lo; Q's copy; K's and V's
	blk, rc, kc := c.per*c.rb*c.ld, c.per*c.rb*3*D, c.per*g.Tk*3*D
	buf := o.scratch(4 * (2*blk + rc + 2*kc))
	if o.failed() {
		return true
	}
	defer o.release(buf)
	at := func(elems int) uint64 { return uint64(buf) + 4*uint64(elems) }
	sHi, sLo, q3, k3, v3 := at(0), at(blk), at(2*blk), at(2*blk+rc), at(2*blk+rc+kc)
	for _, j := range f32Fixed(g, c) {
		for r0 := 0; r0 < g.Tq; r0 += c.rb {
			rows := min(c.rb, g.Tq-r0)
			n := visibleKeys(g, r0+rows)
			for c0 := 0; c0 < c.jobs; c0 += c.per {
				nj := min(c.per, c.jobs-c0)
				a := f32RowsOf(g, c)
				a.s, a.slo, a.n, a.rows, a.njobs = sHi, sLo, int64(n), int64(rows), int64(nj)
				a.b0, a.db, a.h0, a.dh, a.i0 = int64(j.b+c0*j.db), int64(j.db), int64(j.h+c0*j.dh), int64(j.dh), int64(r0)
				oa := f32Elem(g.O, j.q(g.O, c0, r0))
				if n == 0 {
					a.zero, a.zjob, a.zrow = oa, int64(j.qStride(g.O)), int64(g.O.ST)
					o.f32Launch(rowKernel("attn_f32_softmax", n), nj*rows, &a)
					continue
				}
				o.x3Split(q3, g.Q, j.q(g.Q, c0, r0), j.qStride(g.Q), rows, D, nj, 1)
				o.x3Split(k3, g.K, j.kv(g.K, c0, 0), j.kvStride(g.K), n, D, nj, 2)
				o.x3Split(v3, g.V, j.kv(g.V, c0, 0), j.kvStride(g.V), n, D, nj, 2)
				if !o.f32Gemm(matmul{transB: true, m: rows, n: n, k: 3 * D, batch: nj, a: q3, lda: 3 * D, sa: rows * 3 * D,
					b: k3, ldb: 3 * D, sb: n * 3 * D, c: sHi, ldc: c.ld, sc: rows * c.ld, alpha: g.Scale, tf32: true}) {
					return false
				}
				o.f32Launch(rowKernel("attn_f32_softmax", n), nj*rows, &a)
				vh, vl := v3, v3+4*uint64(2*D) // V's copy is [hi | hi | lo]
				if !o.x3Sum(matmul{m: rows, n: D, k: n, batch: nj, lda: c.ld, sa: rows * c.ld, ldb: 3 * D, sb: n * 3 * D,
					c: oa, ldc: g.O.ST, sc: j.qStride(g.O), alpha: 1}, [3]uint64{sLo, sHi, sHi}, [3]uint64{vh, vl, vh}, 0) {
					return false
				}
				if o.failed() {
					return true
				}
			}
		}
	}
	return true
}

// attnX3Backward is attnF32Backward with 3xTF32 products.
func (o *op) attnX3Backward(g opcheck.Attention) bool {
	D := g.D
	c := f32Plan(g, 4, 6*D, 6*D) // P' and dS hi and lo; Q's and dO's copies; K's and V's
	blk, rc, kc := c.per*c.rb*c.ld, c.per*c.rb*3*D, c.per*g.Tk*3*D
	buf := o.scratch(4 * (4*blk + 2*rc + 2*kc))
	if o.failed() {
		return true
	}
	defer o.release(buf)
	at := func(elems int) uint64 { return uint64(buf) + 4*uint64(elems) }
	sHi, sLo, dpHi, dpLo := at(0), at(blk), at(2*blk), at(3*blk)
	q3, do3, k3, v3 := at(4*blk), at(4*blk+rc), at(4*blk+2*rc), at(4*blk+2*rc+kc)
	G := g.Group()
	col := func(p uint64, k int) uint64 { return p + 4*uint64(k*D) } // column block k of a 3·D-wide copy
	for _, j := range f32Fixed(g, c) {
		gi := j.h % G
		for bi, r0 := range c.backwardBlocks(g) {
			rows := min(c.rb, g.Tq-r0)
			n := visibleKeys(g, r0+rows)
			var beta float32 = 1
			if gi == 0 && bi == 0 {
				beta = 0
			}
			for c0 := 0; c0 < c.jobs; c0 += c.per {
				nj := min(c.per, c.jobs-c0)
				a := f32RowsOf(g, c)
				a.s, a.dp, a.slo, a.dplo, a.n, a.rows, a.njobs = sHi, dpHi, sLo, dpLo, int64(n), int64(rows), int64(nj)
				a.b0, a.db, a.h0, a.dh, a.i0 = int64(j.b+c0*j.db), int64(j.db), int64(j.h+c0*j.dh), int64(j.dh), int64(r0)
				dq := f32Elem(g.DQ, j.q(g.DQ, c0, r0))
				if n == 0 {
					a.zero, a.zjob, a.zrow = dq, int64(j.qStride(g.DQ)), int64(g.DQ.ST)
					o.f32Launch(rowKernel("attn_f32_dsoftmax", n), nj*rows, &a)
					continue
				}
				o.x3Split(q3, g.Q, j.q(g.Q, c0, r0), j.qStride(g.Q), rows, D, nj, 1)     // [hi | lo | hi]
				o.x3Split(do3, g.DO, j.q(g.DO, c0, r0), j.qStride(g.DO), rows, D, nj, 1) // [hi | lo | hi]
				o.x3Split(k3, g.K, j.kv(g.K, c0, 0), j.kvStride(g.K), n, D, nj, 2)       // [hi | hi | lo]
				o.x3Split(v3, g.V, j.kv(g.V, c0, 0), j.kvStride(g.V), n, D, nj, 2)       // [hi | hi | lo]
				rowsMM := matmul{transB: true, m: rows, n: n, k: 3 * D, batch: nj, lda: 3 * D, sa: rows * 3 * D,
					ldb: 3 * D, sb: n * 3 * D, ldc: c.ld, sc: rows * c.ld, tf32: true}
				s, dp := rowsMM, rowsMM
				s.a, s.b, s.c, s.alpha = q3, k3, sHi, g.Scale
				dp.a, dp.b, dp.c, dp.alpha = do3, v3, dpHi, 1
				if !o.f32Gemm(s) || !o.f32Gemm(dp) {
					return false
				}
				o.f32Launch(rowKernel("attn_f32_dsoftmax", n), nj*rows, &a)
				// dV (+)= P'loᵀ·dOhi + P'hiᵀ·dOlo + P'hiᵀ·dOhi
				if !o.x3Sum(matmul{transA: true, m: n, n: D, k: rows, batch: nj, lda: c.ld, sa: rows * c.ld, ldb: 3 * D, sb: rows * 3 * D,
					c: f32Elem(g.DV, j.kv(g.DV, c0, 0)), ldc: g.DV.ST, sc: j.kvStride(g.DV), alpha: 1},
					[3]uint64{sLo, sHi, sHi}, [3]uint64{col(do3, 0), col(do3, 1), col(do3, 0)}, beta) {
					return false
				}
				// dQ = Scale·(dSlo·Khi + dShi·Klo + dShi·Khi)
				if !o.x3Sum(matmul{m: rows, n: D, k: n, batch: nj, lda: c.ld, sa: rows * c.ld, ldb: 3 * D, sb: n * 3 * D,
					c: dq, ldc: g.DQ.ST, sc: j.qStride(g.DQ), alpha: g.Scale},
					[3]uint64{dpLo, dpHi, dpHi}, [3]uint64{col(k3, 0), col(k3, 2), col(k3, 0)}, 0) {
					return false
				}
				// dK (+)= Scale·(dSloᵀ·Qhi + dShiᵀ·Qlo + dShiᵀ·Qhi)
				if !o.x3Sum(matmul{transA: true, m: n, n: D, k: rows, batch: nj, lda: c.ld, sa: rows * c.ld, ldb: 3 * D, sb: rows * 3 * D,
					c: f32Elem(g.DK, j.kv(g.DK, c0, 0)), ldc: g.DK.ST, sc: j.kvStride(g.DK), alpha: g.Scale},
					[3]uint64{dpLo, dpHi, dpHi}, [3]uint64{col(q3, 0), col(q3, 1), col(q3, 0)}, beta) {
					return false
				}
				if o.failed() {
					return true
				}
			}
		}
	}
	return true
}
