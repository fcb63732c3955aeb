//go:build cuda

package cuda

import (
	"github.com/tune-ml/tune/tensor"
)

// gemmGeom is a validated GEMM's geometry (tensor.GemmArgs with defaults filled in), as in tensor/cpu.
type gemmGeom struct {
	transA, transB            bool
	m, n, k, batch            int
	lda, ldb, ldc             int
	strideA, strideB, strideC int
}

func (g gemmGeom) storedA() (rows, cols int) {
	if g.transA {
		return g.k, g.m
	}
	return g.m, g.k
}

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

// Gemm computes C = alpha·op(A)·op(B) + beta·C (+ Bias), row-major, for Batch members (tensor.GemmArgs) on
// cuBLASLt with CUBLAS_COMPUTE_32F (FP32 accumulation; CUBLAS_COMPUTE_32F_FAST_TF32 for F32 inputs only when
// SetAllowTF32(true)). Defaults and checks are tensor/cpu's: LDA/LDB/LDC 0 mean dense, a non-zero ld must be
// at least the stored column count, Batch 0 is 1, strides ≥ 0 (StrideA or StrideB 0 broadcasts), StrideC must
// keep the batch's C matrices disjoint, and every tensor must hold the elements the product touches.
//
// Paths, fastest first:
//  1. direct: one cublasLtMatmul on the caller's pointers, the bias fused as the BIAS epilogue (single batch,
//     16-byte aligned bias) so that alpha·AB + beta·C + bias is rounded to C's dtype once;
//  2. for an F32 C whose bias cannot be fused: the direct product, then a bias kernel (still one rounding);
//  3. staged, when cuBLASLt has no algorithm for the caller's layout or dtypes (F32 inputs with a half C, a
//     half C with an unfusable bias, pointers too misaligned): A and B are packed into 256-byte-aligned scratch
//     with leading dimensions padded to a multiple of 8, the product (with beta·C and the bias) is formed in an
//     FP32 scratch matrix and rounded into C once. It is slower but always available; if even it finds no
//     algorithm the error is CUBLAS_STATUS_NOT_SUPPORTED naming the shape.
//
// The algorithm is chosen by cuBLASLt's heuristic once per shape, dtype, alignment and epilogue and cached.
// beta == 0 does not read C (NaN there does not propagate). Elements of C between rows are never written.
func (b *Backend) Gemm(a tensor.GemmArgs) (err error) {
	o := b.begin("Gemm", a.A, a.B, a.C, a.Bias)
	defer o.end(&err)
	o.float("A", a.A).float("B", a.B).float("C", a.C)
	if a.Bias != nil {
		o.float("Bias", a.Bias)
	}
	if o.failed() {
		return
	}
	g := o.gemmGeometry(a)
	if o.failed() {
		return
	}
	ar, ac := g.storedA()
	br, bc := g.storedB()
	extA, extB := extent(g.batch, g.strideA, ar, ac, g.lda), extent(g.batch, g.strideB, br, bc, g.ldb)
	extC := extent(g.batch, g.strideC, g.m, g.n, g.ldc)
	o.that(a.A.Numel() >= extA, tensor.ErrShape, "A has %d elements; the product reads %d", a.A.Numel(), extA)
	o.that(a.B.Numel() >= extB, tensor.ErrShape, "B has %d elements; the product reads %d", a.B.Numel(), extB)
	o.that(a.C.Numel() >= extC, tensor.ErrShape, "C has %d elements; the product writes %d", a.C.Numel(), extC)
	if a.Bias != nil {
		o.numel("Bias", a.Bias, g.n)
	}
	if o.failed() || g.m == 0 || g.n == 0 {
		return
	}
	if g.k == 0 { // C = beta·C + bias
		o.matBias(addr(a.C), a.C.DType, g.ldc, g.strideC, g, a.Bias, a.Beta, true)
		return
	}
	mm := matmul{transA: g.transA, transB: g.transB, m: g.m, n: g.n, k: g.k, batch: g.batch,
		a: addr(a.A), b: addr(a.B), c: addr(a.C), lda: g.lda, ldb: g.ldb, ldc: g.ldc,
		sa: g.strideA, sb: g.strideB, sc: g.strideC, ab: a.A.DType, cdt: a.C.DType, alpha: a.Alpha, beta: a.Beta}
	reason := "F32 inputs into a half C"
	if directTypes(a.A.DType, a.C.DType) {
		if a.Bias != nil && g.batch == 1 && addr(a.Bias)%16 == 0 {
			fused := mm
			fused.bias, fused.biasT = addr(a.Bias), a.Bias.DType
			if e := o.ltMatmul(fused); e == nil || !errNoAlgorithm(e) {
				o.fail(e)
				return
			}
		}
		reason = "half C with a bias the epilogue does not take"
		if a.Bias == nil || a.C.DType == tensor.F32 {
			e := o.ltMatmul(mm)
			if e == nil {
				o.matBias(addr(a.C), a.C.DType, g.ldc, g.strideC, g, a.Bias, 0, false)
				return
			}
			if !errNoAlgorithm(e) {
				o.fail(e)
				return
			}
			reason = "no cuBLASLt algorithm for the layout"
		}
	}
	o.stagedGemm(g, a, reason)
	return
}

// gemmGeometry fills GemmArgs defaults and validates sizes, leading dimensions and strides (tensor/cpu's rules).
func (o *op) gemmGeometry(a tensor.GemmArgs) gemmGeom {
	g := gemmGeom{transA: a.TransA, transB: a.TransB, m: a.M, n: a.N, k: a.K, batch: a.Batch,
		lda: a.LDA, ldb: a.LDB, ldc: a.LDC, strideA: a.StrideA, strideB: a.StrideB, strideC: a.StrideC}
	o.that(a.A.DType == a.B.DType, tensor.ErrDType, "A is %v but B is %v; they must share a dtype", a.A.DType, a.B.DType)
	o.that(a.M >= 0 && a.N >= 0 && a.K >= 0, tensor.ErrArgument, "M, N, K = %d, %d, %d; want ≥ 0", a.M, a.N, a.K)
	o.that(a.Batch >= 0, tensor.ErrArgument, "Batch = %d, want ≥ 0 (0 means 1)", a.Batch)
	o.that(a.StrideA >= 0 && a.StrideB >= 0 && a.StrideC >= 0, tensor.ErrArgument, "strides %d, %d, %d; want ≥ 0", a.StrideA, a.StrideB, a.StrideC)
	if o.failed() {
		return g
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
		o.that(*ld.v >= max(1, ld.cols), tensor.ErrArgument, "%s = %d is less than the %d stored columns", ld.name, ld.given, ld.cols)
	}
	if g.batch > 1 && g.m > 0 && g.n > 0 {
		need := (g.m-1)*g.ldc + g.n
		o.that(g.strideC >= need, tensor.ErrArgument, "StrideC = %d overlaps batch members' C (each spans %d elements)", g.strideC, need)
	}
	return g
}

// matBias queues c = (scaleC ? beta·c : c) + bias over the batch of M×N matrices at device address c
// (kernels/elementwise.cu mat_bias). Without a bias and without scaling it does nothing.
func (o *op) matBias(c uint64, cdt tensor.DType, ldc, sc int, g gemmGeom, bias *tensor.Tensor, beta float32, scaleC bool) {
	if bias == nil && !scaleC {
		return
	}
	total := g.m * g.n * g.batch
	o.launch("elementwise.cu", "mat_bias", o.gridFor(total), 1, 256, 1, c, uint64(cdt), i64(ldc), i64(sc),
		i64(g.m), i64(g.n), i64(g.batch), addr(bias), dt(bias), f32(beta), flag(scaleC))
}

// matCast queues dst = src over a batch of rows×cols matrices (kernels/elementwise.cu mat_cast).
func (o *op) matCast(dst uint64, ddt tensor.DType, ldd, sd int, src uint64, sdt tensor.DType, lds, ss, rows, cols, batch int) {
	o.launch("elementwise.cu", "mat_cast", o.gridFor(rows*cols*batch), 1, 256, 1, dst, uint64(ddt), i64(ldd), i64(sd),
		src, uint64(sdt), i64(lds), i64(ss), i64(rows), i64(cols), i64(batch))
}

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// stagedGemm is Gemm's fallback path: operands packed into aligned scratch with padded leading dimensions
// (broadcast operands expanded), the product in an FP32 scratch C, rounded into C once.
func (o *op) stagedGemm(g gemmGeom, a tensor.GemmArgs, reason string) {
	o.b.stagedGemms[reason]++
	ar, ac := g.storedA()
	br, bc := g.storedB()
	lda, ldb, ldc := roundUp(ac, 8), roundUp(bc, 8), roundUp(g.n, 8)
	sa, sb, sc := ar*lda, br*ldb, g.m*ldc
	ab := a.A.DType
	pa := o.scratch(g.batch * sa * ab.Size())
	pb := o.scratch(g.batch * sb * ab.Size())
	pc := o.scratch(g.batch * sc * 4)
	defer o.release(pa)
	defer o.release(pb)
	defer o.release(pc)
	if o.failed() {
		return
	}
	o.matCast(uint64(pa), ab, lda, sa, addr(a.A), ab, g.lda, g.strideA, ar, ac, g.batch)
	o.matCast(uint64(pb), ab, ldb, sb, addr(a.B), ab, g.ldb, g.strideB, br, bc, g.batch)
	if a.Beta != 0 {
		o.matCast(uint64(pc), tensor.F32, ldc, sc, addr(a.C), a.C.DType, g.ldc, g.strideC, g.m, g.n, g.batch)
	}
	if o.failed() {
		return
	}
	mm := matmul{transA: g.transA, transB: g.transB, m: g.m, n: g.n, k: g.k, batch: g.batch,
		a: uint64(pa), b: uint64(pb), c: uint64(pc), lda: lda, ldb: ldb, ldc: ldc, sa: sa, sb: sb, sc: sc,
		ab: ab, cdt: tensor.F32, alpha: a.Alpha, beta: a.Beta}
	if o.fail(o.ltMatmul(mm)) != nil {
		return
	}
	o.matBias(uint64(pc), tensor.F32, ldc, sc, g, a.Bias, 0, false)
	o.matCast(addr(a.C), a.C.DType, g.ldc, g.strideC, uint64(pc), tensor.F32, ldc, sc, g.m, g.n, g.batch)
}
