//go:build cuda

package cuda

import (
	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// gemmGeom is a validated GEMM's geometry (tensor.GemmArgs with defaults filled in), shared with tensor/cpu.
type gemmGeom = opcheck.Gemm

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
// The algorithm is chosen once per shape, dtype, alignment and epilogue and cached: the GEMM table's
// (gemmtable.go: fixed per GPU, cuBLASLt version and shape) or else cuBLASLt's first heuristic result.
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
	g, e := opcheck.GemmGeometry(a)
	o.fail(e)
	if o.failed() || g.M == 0 || g.N == 0 {
		return
	}
	if g.K == 0 { // C = beta·C + bias
		o.matBias(addr(a.C), a.C.DType, g.LDC, g.StrideC, g, a.Bias, a.Beta, true)
		return
	}
	mm := matmul{transA: g.TransA, transB: g.TransB, m: g.M, n: g.N, k: g.K, batch: g.Batch,
		a: addr(a.A), b: addr(a.B), c: addr(a.C), lda: g.LDA, ldb: g.LDB, ldc: g.LDC,
		sa: g.StrideA, sb: g.StrideB, sc: g.StrideC, ab: a.A.DType, cdt: a.C.DType, alpha: a.Alpha, beta: a.Beta}
	reason := "F32 inputs into a half C"
	if directTypes(a.A.DType, a.C.DType) {
		if a.Bias != nil && g.Batch == 1 && addr(a.Bias)%16 == 0 {
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
				o.matBias(addr(a.C), a.C.DType, g.LDC, g.StrideC, g, a.Bias, 0, false)
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

// matBias queues c = (scaleC ? beta·c : c) + bias over the batch of M×N matrices at device address c
// (kernels/elementwise.cu mat_bias). Without a bias and without scaling it does nothing.
func (o *op) matBias(c uint64, cdt tensor.DType, ldc, sc int, g gemmGeom, bias *tensor.Tensor, beta float32, scaleC bool) {
	if bias == nil && !scaleC {
		return
	}
	total := g.M * g.N * g.Batch
	o.launch("elementwise.cu", "mat_bias", o.gridFor(total), 1, 256, 1, c, uint64(cdt), i64(ldc), i64(sc),
		i64(g.M), i64(g.N), i64(g.Batch), addr(bias), dt(bias), f32(beta), flag(scaleC))
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
	ar, ac := g.StoredA()
	br, bc := g.StoredB()
	lda, ldb, ldc := roundUp(ac, 8), roundUp(bc, 8), roundUp(g.N, 8)
	sa, sb, sc := ar*lda, br*ldb, g.M*ldc
	ab := a.A.DType
	pa := o.scratch(g.Batch * sa * ab.Size())
	pb := o.scratch(g.Batch * sb * ab.Size())
	pc := o.scratch(g.Batch * sc * 4)
	defer o.release(pa)
	defer o.release(pb)
	defer o.release(pc)
	if o.failed() {
		return
	}
	o.matCast(uint64(pa), ab, lda, sa, addr(a.A), ab, g.LDA, g.StrideA, ar, ac, g.Batch)
	o.matCast(uint64(pb), ab, ldb, sb, addr(a.B), ab, g.LDB, g.StrideB, br, bc, g.Batch)
	if a.Beta != 0 {
		o.matCast(uint64(pc), tensor.F32, ldc, sc, addr(a.C), a.C.DType, g.LDC, g.StrideC, g.M, g.N, g.Batch)
	}
	if o.failed() {
		return
	}
	mm := matmul{transA: g.TransA, transB: g.TransB, m: g.M, n: g.N, k: g.K, batch: g.Batch,
		a: uint64(pa), b: uint64(pb), c: uint64(pc), lda: lda, ldb: ldb, ldc: ldc, sa: sa, sb: sb, sc: sc,
		ab: ab, cdt: tensor.F32, alpha: a.Alpha, beta: a.Beta}
	if o.fail(o.ltMatmul(mm)) != nil {
		return
	}
	o.matBias(uint64(pc), tensor.F32, ldc, sc, g, a.Bias, 0, false)
	o.matCast(addr(a.C), a.C.DType, g.LDC, g.StrideC, uint64(pc), tensor.F32, ldc, sc, g.M, g.N, g.Batch)
}
