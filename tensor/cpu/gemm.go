package cpu

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/tune-ml/tune/tensor"
)

// gemmGeom is a validated GEMM's geometry (tensor.GemmArgs with defaults filled in): op(A) is m×k, op(B) k×n,
// C m×n, all row-major with row strides ld* and batch strides stride*.
type gemmGeom struct {
	transA, transB            bool
	m, n, k, batch            int
	lda, ldb, ldc             int
	strideA, strideB, strideC int
}

// storedA returns the rows and columns of A as stored (op(A) is m×k).
func (g gemmGeom) storedA() (rows, cols int) {
	if g.transA {
		return g.k, g.m
	}
	return g.m, g.k
}

// storedB returns the rows and columns of B as stored (op(B) is k×n).
func (g gemmGeom) storedB() (rows, cols int) {
	if g.transB {
		return g.n, g.k
	}
	return g.k, g.n
}

// extent is the number of elements a batch of row-major matrices spans from its first element.
func extent(batch, stride, rows, cols, ld int) int {
	if batch == 0 || rows == 0 || cols == 0 {
		return 0
	}
	return (batch-1)*stride + (rows-1)*ld + cols
}

func (g gemmGeom) extents() (a, b, c int) {
	ar, ac := g.storedA()
	br, bc := g.storedB()
	return extent(g.batch, g.strideA, ar, ac, g.lda), extent(g.batch, g.strideB, br, bc, g.ldb),
		extent(g.batch, g.strideC, g.m, g.n, g.ldc)
}

// blasGemm is one row-major c = alpha·op(a)·op(b) + beta·c through gonum's pure-Go BLAS (Sgemm for float32,
// Dgemm for float64). Unless only B is transposed, gonum skips the terms whose alpha·a element is exactly 0,
// so there an Inf in b meeting a 0 in a adds 0 instead of NaN (cuBLAS gives NaN).
func blasGemm[T scalar](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
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
	if g.m == 0 || g.n == 0 || g.batch == 0 {
		return
	}
	one := func(i int) {
		ci := c[i*g.strideC:]
		if g.k == 0 {
			scaleRows(ci, g.m, g.n, g.ldc, beta)
		} else {
			blasGemm(g.transA, g.transB, g.m, g.n, g.k, alpha, a[i*g.strideA:], g.lda, b[i*g.strideB:], g.ldb, beta, ci, g.ldc)
		}
		if bias != nil {
			for r := 0; r < g.m; r++ {
				axpyKernel(ci[r*g.ldc:r*g.ldc+g.n], bias, 1)
			}
		}
	}
	blocks := ((g.m + 63) / 64) * ((g.n + 63) / 64)
	if g.batch > 1 && blocks < 4 {
		parallelFor(g.batch, g.m*g.n*max(g.k, 1), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				one(i)
			}
		})
		return
	}
	for i := 0; i < g.batch; i++ {
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
	g, err := gemmGeometry(c, a)
	if err != nil {
		return err
	}
	extA, extB, extC := g.extents()
	c.that(a.A.Numel() >= extA, tensor.ErrShape, "A has %d elements; the product reads %d", a.A.Numel(), extA)
	c.that(a.B.Numel() >= extB, tensor.ErrShape, "B has %d elements; the product reads %d", a.B.Numel(), extB)
	c.that(a.C.Numel() >= extC, tensor.ErrShape, "C has %d elements; the product writes %d", a.C.Numel(), extC)
	if a.Bias != nil {
		c.numel("Bias", a.Bias, g.n)
	}
	if c.Err() != nil {
		return c.Err()
	}
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
		widen(cv, bits, a.C.DType)
	}
	gemmKernel(g, a.Alpha, av, bv, a.Beta, cv, bias)
	for i := 0; i < g.batch; i++ {
		for r := 0; r < g.m; r++ {
			o := i*g.strideC + r*g.ldc
			narrow(bits[o:o+g.n], cv[o:o+g.n], a.C.DType)
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
	widen(v, u16Of(t)[:n], t.DType)
	return v
}

// gemmGeometry fills GemmArgs defaults and validates sizes, leading dimensions and strides.
func gemmGeometry(c *check, a tensor.GemmArgs) (gemmGeom, error) {
	g := gemmGeom{transA: a.TransA, transB: a.TransB, m: a.M, n: a.N, k: a.K, batch: a.Batch,
		lda: a.LDA, ldb: a.LDB, ldc: a.LDC, strideA: a.StrideA, strideB: a.StrideB, strideC: a.StrideC}
	c.that(a.A.DType == a.B.DType, tensor.ErrDType, "A is %v but B is %v; they must share a dtype", a.A.DType, a.B.DType)
	c.that(a.M >= 0 && a.N >= 0 && a.K >= 0, tensor.ErrArgument, "M, N, K = %d, %d, %d; want ≥ 0", a.M, a.N, a.K)
	c.that(a.Batch >= 0, tensor.ErrArgument, "Batch = %d, want ≥ 0 (0 means 1)", a.Batch)
	c.that(a.StrideA >= 0 && a.StrideB >= 0 && a.StrideC >= 0, tensor.ErrArgument,
		"strides %d, %d, %d; want ≥ 0", a.StrideA, a.StrideB, a.StrideC)
	if c.Err() != nil {
		return g, c.Err()
	}
	g.batch = max(g.batch, 1)
	_, ac := g.storedA()
	_, bc := g.storedB()
	for _, ld := range []struct {
		name  string
		v     *int
		cols  int
		given int
	}{{"LDA", &g.lda, ac, a.LDA}, {"LDB", &g.ldb, bc, a.LDB}, {"LDC", &g.ldc, g.n, a.LDC}} {
		if *ld.v == 0 {
			*ld.v = max(1, ld.cols)
		}
		c.that(*ld.v >= max(1, ld.cols), tensor.ErrArgument, "%s = %d is less than the %d stored columns", ld.name, ld.given, ld.cols)
	}
	if g.batch > 1 && g.m > 0 && g.n > 0 {
		need := (g.m-1)*g.ldc + g.n
		c.that(g.strideC >= need, tensor.ErrArgument, "StrideC = %d overlaps batch members' C (each spans %d elements)", g.strideC, need)
	}
	return g, c.Err()
}
