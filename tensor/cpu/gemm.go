package cpu

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// gemmGeom is a validated GEMM's geometry, shared with the CUDA backend (opcheck.Gemm): op(A) is M×K, op(B) K×N,
// C M×N, all row-major with row strides LD* and batch strides Stride*.
type gemmGeom = opcheck.Gemm

// blasGemm is one row-major c = alpha·op(a)·op(b) + beta·c. float32 goes through the packed SIMD GEMM
// (sgemm.go) when the processor has a micro-kernel for it, else gonum's pure-Go Sgemm; float64 (the FP64
// gradcheck) always through gonum's Dgemm. parallel says whether the product may use every core. gonum (unless
// only B is transposed) skips the terms whose alpha·a element is exactly 0, so there an Inf in b meeting a 0 in
// a adds 0 instead of NaN; the packed path gives NaN, as cuBLAS does.
func blasGemm[T scalar](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, parallel bool) {
	if cc, ok := any(c).([]float32); ok && gemmPath != nil {
		sgemmPacked(gemmPath, tA, tB, m, n, k, float32(alpha), any(a).([]float32), lda, any(b).([]float32), ldb, float32(beta), cc, ldc, parallel)
		return
	}
	ta, tb := blas.NoTrans, blas.NoTrans
	if tA {
		ta = blas.Trans
	}
	if tB {
		tb = blas.Trans
	}
	switch cc := any(c).(type) {
	case []float32:
		gonum.Implementation{}.Sgemm(ta, tb, m, n, k, float32(alpha), any(a).([]float32), lda, any(b).([]float32), ldb, float32(beta), cc, ldc)
	case []float64:
		gonum.Implementation{}.Dgemm(ta, tb, m, n, k, float64(alpha), any(a).([]float64), lda, any(b).([]float64), ldb, float64(beta), cc, ldc)
	}
}

// gemmKernel computes every batch member of C = alpha·op(A)·op(B) + beta·C + bias (bias of n elements or
// nil) with accumulation in T. beta == 0 does not read C (NaN there does not propagate), as in BLAS.
// Members whose product is too small for gonum's block parallelism (fewer than four 64×64 blocks of C) are
// spread over goroutines instead; members must not share C elements.
func gemmKernel[T scalar](g gemmGeom, alpha T, a, b []T, beta T, c, bias []T) {
	if g.M == 0 || g.N == 0 || g.Batch == 0 {
		return
	}
	if cc, ok := any(c).([]float32); ok && useSmallGemm(g) {
		var bias32 []float32
		if bias != nil {
			bias32 = any(bias).([]float32)
		}
		smallGemm(g, float32(alpha), any(a).([]float32), any(b).([]float32), float32(beta), cc, bias32)
		return
	}
	blocks := ((g.M + 63) / 64) * ((g.N + 63) / 64)
	batchParallel := g.Batch > 1 && blocks < 4
	one := func(i int) {
		ci := c[i*g.StrideC:]
		if g.K == 0 {
			scaleRows(ci, g.M, g.N, g.LDC, beta)
		} else {
			blasGemm(g.TransA, g.TransB, g.M, g.N, g.K, alpha, a[i*g.StrideA:], g.LDA, b[i*g.StrideB:], g.LDB, beta, ci, g.LDC, !batchParallel)
		}
		if bias != nil {
			for r := 0; r < g.M; r++ {
				axpyKernel(ci[r*g.LDC:r*g.LDC+g.N], bias, 1)
			}
		}
	}
	if batchParallel {
		parallelFor(g.Batch, g.M*g.N*max(g.K, 1), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				one(i)
			}
		})
		return
	}
	for i := 0; i < g.Batch; i++ {
		one(i)
	}
}

// scaleRows sets an m×n block with row stride ld to beta·c (to 0 when beta == 0, without reading c).
func scaleRows[T scalar](c []T, m, n, ld int, beta T) {
	for r := 0; r < m; r++ {
		row := c[r*ld : r*ld+n]
		if beta == 0 {
			clear(row)
		} else {
			scaleKernel(row, beta)
		}
	}
}

// Gemm computes C = alpha·op(A)·op(B) + beta·C (+ Bias), row-major, for Batch members (see tensor.GemmArgs).
// A and B share one float dtype; half inputs are widened exactly to FP32 scratch; accumulation is FP32
// (gonum Sgemm); beta·C reads C in FP32 and is skipped entirely when beta == 0; Bias (N elements, any float
// dtype) is added last; the result is rounded to C's dtype once. Elements of C between rows (LDC > N) are
// never written.
//
// Defaults and checks: LDA/LDB/LDC 0 mean dense (the stored column count); a non-zero ld must be at least
// that. Batch 0 is taken as 1. Strides must be ≥ 0 (StrideA or StrideB 0 broadcasts one matrix over the
// batch); StrideC must keep the batch's C matrices disjoint. Each tensor must hold every element the product
// reads or writes, counted from its Offset (ErrShape). One known difference from cuBLAS: an Inf in B that
// meets only exact zeros of A may contribute 0 rather than NaN (see blasGemm); an Inf meeting any non-zero
// still makes the result non-finite.
func (bk *Backend) Gemm(a tensor.GemmArgs) (err error) {
	defer guard(&err, "Gemm", a.A, a.B, a.C, a.Bias)
	c := newCheck("Gemm", a.A, a.B, a.C, a.Bias).float("A", a.A).float("B", a.B).float("C", a.C)
	if a.Bias != nil {
		c.float("Bias", a.Bias)
	}
	if c.Err() != nil {
		return c.Err()
	}
	g, err := opcheck.GemmGeometry(a)
	if c.record(err).Err() != nil {
		return c.Err()
	}
	extA, extB, extC := g.Extents()
	av, bv := loadPrefix(a.A, extA), loadPrefix(a.B, extB)
	var bias []float32
	if a.Bias != nil {
		bias = load(a.Bias)
	}
	if a.C.DType == tensor.F32 {
		gemmKernel(g, a.Alpha, av, bv, a.Beta, f32Of(a.C)[:extC], bias)
		return nil
	}
	cv := make([]float32, extC)
	bits := u16Of(a.C)[:extC]
	if a.Beta != 0 {
		tensor.WidenHalf(cv, bits, a.C.DType)
	}
	gemmKernel(g, a.Alpha, av, bv, a.Beta, cv, bias)
	for i := 0; i < g.Batch; i++ {
		for r := 0; r < g.M; r++ {
			o := i*g.StrideC + r*g.LDC
			tensor.NarrowHalf(bits[o:o+g.N], cv[o:o+g.N], a.C.DType)
		}
	}
	return nil
}

// loadPrefix returns the first n elements of t in FP32 (storage for F32, a widened copy for half).
func loadPrefix(t *tensor.Tensor, n int) []float32 {
	if t.DType == tensor.F32 {
		return f32Of(t)[:n]
	}
	v := make([]float32, n)
	tensor.WidenHalf(v, u16Of(t)[:n], t.DType)
	return v
}
