package opcheck

import (
	"fmt"

	"github.com/tune-ml/tune/tensor"
)

// Gemm is a validated GEMM's geometry: tensor.GemmArgs with its defaults filled in. op(A) is M×K, op(B) K×N
// and C M×N, all row-major with row strides LD* and batch strides Stride* (in elements), over Batch ≥ 1
// members.
type Gemm struct {
	TransA, TransB            bool // A stored K×M, B stored N×K
	M, N, K, Batch            int  // C is M×N over inner dimension K, for Batch ≥ 1 members
	LDA, LDB, LDC             int  // row strides of the stored matrices in elements, never 0 here
	StrideA, StrideB, StrideC int  // elements between consecutive batch members (0 broadcasts A or B)
}

// GemmGeometry fills the defaults of a (LDA/LDB/LDC 0: dense, the stored column count; Batch 0: 1) and checks
// it: A and B share a dtype (ErrDType); M, N, K, Batch and the strides are ≥ 0, a non-zero leading dimension
// is at least the stored column count, and StrideC keeps the batch members' C matrices disjoint
// (ErrArgument); A, B and C hold every element the product reads or writes, counted from their Offset, and
// Bias, when set, has N elements (ErrShape). StrideA or StrideB 0 broadcasts one matrix over the batch. A, B,
// C and Bias must already have passed View.
func GemmGeometry(a tensor.GemmArgs) (Gemm, error) {
	g := Gemm{TransA: a.TransA, TransB: a.TransB, M: a.M, N: a.N, K: a.K, Batch: a.Batch,
		LDA: a.LDA, LDB: a.LDB, LDC: a.LDC, StrideA: a.StrideA, StrideB: a.StrideB, StrideC: a.StrideC}
	if a.A.DType != a.B.DType {
		return g, Errorf(tensor.ErrDType, "A is %v but B is %v; they must share a dtype", a.A.DType, a.B.DType)
	}
	if !(a.M >= 0 && a.N >= 0 && a.K >= 0) {
		return g, Errorf(tensor.ErrArgument, "M, N, K = %d, %d, %d; want ≥ 0", a.M, a.N, a.K)
	}
	if a.Batch < 0 {
		return g, Errorf(tensor.ErrArgument, "Batch = %d, want ≥ 0 (0 means 1)", a.Batch)
	}
	if !(a.StrideA >= 0 && a.StrideB >= 0 && a.StrideC >= 0) {
		return g, Errorf(tensor.ErrArgument, "strides %d, %d, %d; want ≥ 0", a.StrideA, a.StrideB, a.StrideC)
	}
	g.Batch = max(g.Batch, 1)
	_, ac := g.StoredA()
	_, bc := g.StoredB()
	for _, ld := range []struct {
		name  string
		v     *int
		cols  int
		given int
	}{{"LDA", &g.LDA, ac, a.LDA}, {"LDB", &g.LDB, bc, a.LDB}, {"LDC", &g.LDC, g.N, a.LDC}} {
		if *ld.v == 0 {
			*ld.v = max(1, ld.cols)
		}
		if *ld.v < max(1, ld.cols) {
			return g, Errorf(tensor.ErrArgument, "%s = %d is less than the %d stored columns", ld.name, ld.given, ld.cols)
		}
	}
	if g.Batch > 1 && g.M > 0 && g.N > 0 {
		if need := (g.M-1)*g.LDC + g.N; g.StrideC < need {
			return g, Errorf(tensor.ErrArgument, "StrideC = %d overlaps batch members' C (each spans %d elements)",
				g.StrideC, need)
		}
	}
	extA, extB, extC := g.Extents()
	if a.A.Numel() < extA {
		return g, Errorf(tensor.ErrShape, "A has %d elements; the product reads %d", a.A.Numel(), extA)
	}
	if a.B.Numel() < extB {
		return g, Errorf(tensor.ErrShape, "B has %d elements; the product reads %d", a.B.Numel(), extB)
	}
	if a.C.Numel() < extC {
		return g, Errorf(tensor.ErrShape, "C has %d elements; the product writes %d", a.C.Numel(), extC)
	}
	if a.Bias != nil {
		return g, Numel("Bias", a.Bias, g.N)
	}
	return g, nil
}

// StoredA returns the rows and columns of A as stored (op(A) is M×K).
func (g Gemm) StoredA() (rows, cols int) {
	if g.TransA {
		return g.K, g.M
	}
	return g.M, g.K
}

// StoredB returns the rows and columns of B as stored (op(B) is K×N).
func (g Gemm) StoredB() (rows, cols int) {
	if g.TransB {
		return g.N, g.K
	}
	return g.K, g.N
}

// Extents returns how many elements of A and B the product reads and of C it writes, counted from each
// tensor's first element (see Extent).
func (g Gemm) Extents() (a, b, c int) {
	ar, ac := g.StoredA()
	br, bc := g.StoredB()
	return Extent(g.Batch, g.StrideA, ar, ac, g.LDA), Extent(g.Batch, g.StrideB, br, bc, g.LDB),
		Extent(g.Batch, g.StrideC, g.M, g.N, g.LDC)
}

// Extent is the number of elements a batch of row-major rows×cols matrices with row stride ld and batch stride
// stride spans from its first element (0 when the batch or a matrix is empty).
func Extent(batch, stride, rows, cols, ld int) int {
	if batch == 0 || rows == 0 || cols == 0 {
		return 0
	}
	return (batch-1)*stride + (rows-1)*ld + cols
}

// String describes g for test names and messages.
func (g Gemm) String() string {
	return fmt.Sprintf("transA=%v transB=%v m=%d n=%d k=%d batch=%d ld=(%d,%d,%d) stride=(%d,%d,%d)",
		g.TransA, g.TransB, g.M, g.N, g.K, g.Batch, g.LDA, g.LDB, g.LDC, g.StrideA, g.StrideB, g.StrideC)
}
