package cpu

// The small-product path of Gemm: products whose B operand (K × N) is small enough to stay in L2 go through
// sgemmSmallAVX512, which reads A in place (either layout, through its row and column strides) and B as K × N
// rows, instead of packing both (sgemm.go). At the tiny model's shapes (640 rows, 64–192 columns, K 64–640) packing
// A costs as much as the arithmetic and most tiles are edge tiles. A transposed B (the Linear layers' y = x·Wᵀ) is
// transposed into scratch once per call. The bias, when C is overwritten, is written first and the product added
// to it (the same two roundings as adding it afterwards). Every element of C is computed by one task with its sum
// over K in order, so the results do not depend on the core count.

// smallGemmMaxB bounds K·N (floats of B) for the small path: 64 Ki floats = 256 KiB, within L2.
const smallGemmMaxB = 1 << 16

// smallGemmOn enables the small path (tests of the micro-kernels turn it off).
var smallGemmOn = true

// useSmallGemm reports whether the F32 product g takes the small path: with the AVX-512 GEMM path selected.
func useSmallGemm(g gemmGeom) bool {
	return smallGemmOn && hasSIMD && gemmPath != nil && gemmPath.name == "avx512" && g.K > 0 && g.K*g.N <= smallGemmMaxB
}

// smallGemm computes every batch member of C = alpha·op(A)·op(B) + beta·C + bias (gemmKernel's contract) for
// useSmallGemm products.
func smallGemm(g gemmGeom, alpha float32, a, b []float32, beta float32, c, bias []float32) {
	var sc scratch
	defer sc.release()
	// B of each member as dense K × N rows.
	bs := make([][]float32, g.Batch)
	ldb := g.LDB
	for i := range bs {
		bi := b[i*g.StrideB:]
		switch {
		case !g.TransB:
			bs[i] = bi
		case i > 0 && g.StrideB == 0:
			bs[i] = bs[0]
		default:
			t := sc.get(g.K * g.N)
			for j := 0; j < g.N; j++ { // op(B)[p][j] = b[j·LDB + p]
				row := bi[j*g.LDB : j*g.LDB+g.K]
				for p, x := range row {
					t[p*g.N+j] = x
				}
			}
			bs[i] = t
		}
	}
	if g.TransB {
		ldb = g.N
	}
	rsa, csa := g.LDA, 1
	if g.TransA {
		rsa, csa = 1, g.LDA
	}
	acc := beta != 0
	fuseBias := bias != nil && beta == 0
	groups := (g.M + 3) / 4
	parallelFor(g.Batch*groups, 4*g.N*g.K, func(lo, hi int) {
		for t := lo; t < hi; {
			i, r0 := t/groups, (t%groups)*4
			// the run of this member's groups in [t, hi)
			end := min(hi, (i+1)*groups)
			r1 := min(g.M, (end-i*groups)*4)
			ci := c[i*g.StrideC:]
			switch {
			case fuseBias:
				for r := r0; r < r1; r++ {
					copy(ci[r*g.LDC:r*g.LDC+g.N], bias)
				}
			case beta != 0 && beta != 1:
				scaleRows(ci[r0*g.LDC:], r1-r0, g.N, g.LDC, beta)
			}
			sgemmSmall(r1-r0, g.N, g.K, a[i*g.StrideA+r0*rsa:], rsa, csa, bs[i], ldb, ci[r0*g.LDC:], g.LDC, alpha, acc || fuseBias)
			if bias != nil && !fuseBias {
				for r := r0; r < r1; r++ {
					axpyKernel(ci[r*g.LDC:r*g.LDC+g.N], bias, 1)
				}
			}
			t = end
		}
	})
}
