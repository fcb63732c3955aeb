package tensortest

import (
	"fmt"

	"github.com/tune-ml/tune/tensor"
)

// gemmCases: Gemm over the four transpose combinations, single and batched with padded leading dimensions
// and batch strides (and a broadcast B, stride 0), beta = 0 (C poisoned: it must not be read) and beta ≠ 0
// with a bias, C stored as dt or as F32. The backward of a Linear or an attention product is made of these
// same calls (dA = dC·op(B)ᵀ and dB = op(A)ᵀ·dC through the transposes), so this covers it too.
func gemmCases(dt tensor.DType) []opCase {
	g := newGen("gemm" + dt.String())
	var cases []opCase
	for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		for _, batched := range []bool{false, true} {
			for _, beta := range []float32{0, 0.7} {
				cdt := dt
				if len(cases)%3 == 1 {
					cdt = tensor.F32 // half inputs with an FP32 output, as for weight gradients
				}
				cases = append(cases, gemmCase(g, dt, cdt, tr[0], tr[1], batched, beta, beta != 0, false))
			}
		}
	}
	cases = append(cases, gemmCase(g, dt, dt, false, true, true, 1, false, true))
	return cases
}

func gemmCase(g *gen, dt, cdt tensor.DType, transA, transB, batched bool, beta float32, bias, broadcastB bool) opCase {
	m, n, k := g.odd(), g.odd(), g.odd()
	batch, pad := 1, 0
	if batched {
		batch, pad = 3, 1+g.rng.IntN(3)
	}
	ar, ac, br, bc := m, k, k, n
	if transA {
		ar, ac = k, m
	}
	if transB {
		br, bc = n, k
	}
	lda, ldb, ldc := ac+pad, bc+pad, n+pad
	sa, sb, sc := ar*lda+pad, br*ldb+pad, m*ldc+pad
	if broadcastB {
		sb = 0
	}
	ext := func(stride, rows, ld, cols int) int { return (batch-1)*stride + (rows-1)*ld + cols }
	ea, eb, ec := ext(sa, ar, lda, ac), ext(sb, br, ldb, bc), ext(sc, m, ldc, n)
	args := []arg{input("A", dt, g.normal(ea, 1), ea), input("B", dt, g.normal(eb, 1), eb)}
	c := accum("C", cdt, g.normal(ec, 1), ec)
	if beta == 0 {
		c.role = roleOut
		c.keep = make([]bool, ec)
		for i := range c.keep {
			c.keep[i] = true
		}
		for p := 0; p < batch; p++ {
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					c.keep[p*sc+i*ldc+j] = false
				}
			}
		}
	}
	args = append(args, c)
	if bias {
		args = append(args, input("bias", dt, g.normal(n, 1), n))
	}
	name := fmt.Sprintf("Gemm transA=%v transB=%v batch=%d M=%d N=%d K=%d pad=%d beta=%v bias=%v C=%v", transA, transB, batch, m, n, k, pad, beta, bias, cdt)
	if broadcastB {
		name += " B broadcast"
	}
	return opCase{name, args, func(b tensor.Backend, ts []*tensor.Tensor) ([]float64, error) {
		a := tensor.GemmArgs{TransA: transA, TransB: transB, M: m, N: n, K: k, A: ts[0], B: ts[1], C: ts[2],
			LDA: lda, LDB: ldb, LDC: ldc, StrideA: sa, StrideB: sb, StrideC: sc, Batch: batch, Alpha: 0.75, Beta: beta}
		if bias {
			a.Bias = ts[3]
		}
		return none(b.Gemm(a))
	}}
}
