//go:build cuda

package cuda

import (
	"os"

	"github.com/tune-ml/tune/tensor"
)

// thinMax is the largest thin dimension (N or K, or M or N of a transposed-A product) that Gemm sends to the
// kernels of kernels/thin.cu instead of cuBLASLt.
const thinMax = 16

// thinOn lets Gemm send thin products to kernels/thin.cu (TUNE_GEMM_THIN=on). It is off by default: on the
// H200 the thin kernels lost to cuBLASLt in the training step (docs/PERFORMANCE.md, session 6: BERT-base 32×128
// LoRA r=8 with CUDA graphs 8.60 ms with them, 6.04 ms without), so every GEMM takes cuBLASLt unless asked.
var thinOn = os.Getenv("TUNE_GEMM_THIN") == "on"

// thinKind is which thin.cu path a GEMM takes.
type thinKind int

const (
	thinNone   thinKind = iota
	thinSmallK          // K ≤ 16: thin_smallk
	thinRowDot          // N ≤ 16, op(A) = A: thin_rowdot_<4|8|16>
	thinTN              // op(A) = Aᵀ, op(B) = B, M or N ≤ 16: thin_tn_partial_<4|8|16> + thin_tn_reduce
)

// thinPath returns the thin.cu path of a GEMM, a fixed function of its geometry and dtypes (never of timing,
// so that every run and every resume computes the same bits): half A and B, C F32 or A's type, one batch
// member, no bias, K > 0, and a dimension of at most thinMax as each path needs. thinRowDot also needs op(B)
// to fit its shared memory (roundup(K, 8)·NT FP32 words ≤ 12288 for the template NT ≥ N).
func thinPath(g gemmGeom, ab, c tensor.DType, bias bool) thinKind {
	if !thinOn || bias || g.Batch != 1 || g.K == 0 || (ab != tensor.BF16 && ab != tensor.F16) || (c != tensor.F32 && c != ab) {
		return thinNone
	}
	switch {
	case g.K <= thinMax && (g.M+31)/32 <= 65535: // thin_smallk's grid.y: row groups of 32
		return thinSmallK
	case !g.TransA && g.N <= thinMax && roundUp(g.K, 8)*thinNT(g.N) <= 12288:
		return thinRowDot
	case g.TransA && !g.TransB && min(g.M, g.N) <= thinMax:
		return thinTN
	}
	return thinNone
}

// thinNT is the template width of thin_rowdot_<NT> and thin_tn_partial_<NT> for a thin side of n ≤ 16.
func thinNT(n int) int {
	switch {
	case n <= 4:
		return 4
	case n <= 8:
		return 8
	}
	return 16
}

// thinGemm queues a GEMM on the thin.cu kernels when thinPath takes it, and reports whether it did.
func (o *op) thinGemm(g gemmGeom, a tensor.GemmArgs) bool {
	kind := thinPath(g, a.A.DType, a.C.DType, a.Bias != nil)
	if kind == thinNone {
		return false
	}
	pa, pb, pc := addr(a.A), addr(a.B), addr(a.C)
	abt, ct := dt(a.A), dt(a.C)
	switch kind {
	case thinSmallK:
		// ld4/st4 on C: 4 elements aligned (16 bytes F32, 8 bytes half) and rows that keep that alignment.
		vec := g.LDC%4 == 0 && pc%uint64(4*a.C.DType.Size()) == 0
		o.launch("thin.cu", "thin_smallk", (g.N+127)/128, (g.M+31)/32, 256, 1, pa, i64(g.LDA), flag(g.TransA), pb,
			i64(g.LDB), flag(g.TransB), abt, pc, i64(g.LDC), ct, i64(g.M), i64(g.N), i64(g.K), f32(a.Alpha), f32(a.Beta), flag(vec))
	case thinRowDot:
		vec := g.K%8 == 0 && g.LDA%8 == 0 && pa%16 == 0
		groups := (g.M + 3) / 4 // four rows a warp, eight warps a block
		blocks := min((groups+7)/8, 16*o.b.sms)
		name := map[int]string{4: "thin_rowdot_4", 8: "thin_rowdot_8", 16: "thin_rowdot_16"}[thinNT(g.N)]
		o.launch("thin.cu", name, blocks, 1, 256, 1, pa, i64(g.LDA), pb, i64(g.LDB), flag(g.TransB), abt,
			pc, i64(g.LDC), ct, i64(g.M), i64(g.N), i64(g.K), f32(a.Alpha), f32(a.Beta), flag(vec))
	case thinTN:
		// C (M×N) = alpha·Aᵀ·B + beta·C with A stored K×M and B stored K×N: the thin side s of C is the small one.
		smallM := g.M <= g.N && g.M <= thinMax
		big, ldl, small, lds, s, l := pb, g.LDB, pa, g.LDA, g.M, g.N
		if !smallM {
			big, ldl, small, lds, s, l = pa, g.LDA, pb, g.LDB, g.N, g.M
		}
		// Chunks of kc rows (a multiple of 64): at most 128 partials an element for thin_tn_reduce to add, and at
		// most 8 MiB of partials (a wide L has blocks enough across its tiles).
		chunks := max(1, min((g.K+63)/64, 128, (8<<20)/(s*l*4)))
		kc := roundUp((g.K+chunks-1)/chunks, 64)
		chunks = (g.K + kc - 1) / kc
		part := o.scratch(chunks * s * l * 4)
		defer o.release(part)
		if o.failed() {
			return true
		}
		vec := ldl%2 == 0 && big%4 == 0
		name := map[int]string{4: "thin_tn_partial_4", 8: "thin_tn_partial_8", 16: "thin_tn_partial_16"}[thinNT(s)]
		o.launch("thin.cu", name, (l+255)/256, chunks, 128, 1, big, i64(ldl), small, i64(lds), abt,
			uint64(part), i64(g.K), i64(l), i64(s), i64(kc), flag(vec))
		o.launch("thin.cu", "thin_tn_reduce", (s*l+255)/256, 1, 256, 1, uint64(part), i64(chunks), i64(l), i64(s),
			pc, i64(g.LDC), ct, flag(smallM), f32(a.Alpha), f32(a.Beta))
	}
	return true
}
