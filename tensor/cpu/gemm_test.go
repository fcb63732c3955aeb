package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// naiveGemm is the obvious triple loop in float64, written from GemmArgs' documentation independently of
// gemmKernel: C = alpha·op(A)·op(B) + beta·C + bias on the m×n entries of every batch member.
func naiveGemm(g gemmGeom, alpha float64, a, b []float64, beta float64, c, bias []float64) {
	opA := func(p, i, l int) float64 {
		if g.TransA {
			return a[p*g.StrideA+l*g.LDA+i]
		}
		return a[p*g.StrideA+i*g.LDA+l]
	}
	opB := func(p, l, j int) float64 {
		if g.TransB {
			return b[p*g.StrideB+j*g.LDB+l]
		}
		return b[p*g.StrideB+l*g.LDB+j]
	}
	for p := 0; p < g.Batch; p++ {
		for i := 0; i < g.M; i++ {
			for j := 0; j < g.N; j++ {
				var s float64
				for l := 0; l < g.K; l++ {
					s += opA(p, i, l) * opB(p, l, j)
				}
				idx := p*g.StrideC + i*g.LDC + j
				v := alpha * s
				if beta != 0 {
					v += beta * c[idx]
				}
				if bias != nil {
					v += bias[j]
				}
				c[idx] = v
			}
		}
	}
}

// randomGeom draws a GEMM over odd sizes with optional padding of every leading dimension and batch stride.
func randomGeom(rng *rand.Rand, transA, transB bool, batch int, pad bool, broadcastB bool) gemmGeom {
	g := gemmGeom{TransA: transA, TransB: transB, M: pick(rng), N: pick(rng), K: pick(rng), Batch: batch}
	p := func() int {
		if pad {
			return 1 + rng.IntN(3)
		}
		return 0
	}
	_, ac := g.StoredA()
	_, bc := g.StoredB()
	g.LDA, g.LDB, g.LDC = ac+p(), bc+p(), g.N+p()
	ar, _ := g.StoredA()
	br, _ := g.StoredB()
	g.StrideA, g.StrideB, g.StrideC = ar*g.LDA+p(), br*g.LDB+p(), g.M*g.LDC+p()
	if broadcastB {
		g.StrideB = 0
	}
	return g
}

// gemmBackward returns dA, dB in A's and B's stored layouts for L = Σ G ⊙ C, using gemmKernel one batch member
// at a time with beta = 1, so a broadcast operand (stride 0) accumulates over the batch:
//
//	dop(A) = alpha·dC·op(B)ᵀ,  dop(B) = alpha·op(A)ᵀ·dC
func gemmBackward(g gemmGeom, alpha float64, a, b, dc []float64, lenA, lenB int) (da, db []float64) {
	da, db = make([]float64, lenA), make([]float64, lenB)
	for p := 0; p < g.Batch; p++ {
		dcp, ap, bp := dc[p*g.StrideC:], a[p*g.StrideA:], b[p*g.StrideB:]
		dap, dbp := da[p*g.StrideA:], db[p*g.StrideB:]
		if !g.TransA { // dA (m×k) = alpha·dC·op(B)ᵀ
			gemmKernel(gemmGeom{TransB: !g.TransB, M: g.M, N: g.K, K: g.N, Batch: 1, LDA: g.LDC, LDB: g.LDB, LDC: g.LDA}, alpha, dcp, bp, 1, dap, nil)
		} else { // dA (k×m) = alpha·op(B)·dCᵀ
			gemmKernel(gemmGeom{TransA: g.TransB, TransB: true, M: g.K, N: g.M, K: g.N, Batch: 1, LDA: g.LDB, LDB: g.LDC, LDC: g.LDA}, alpha, bp, dcp, 1, dap, nil)
		}
		if !g.TransB { // dB (k×n) = alpha·op(A)ᵀ·dC
			gemmKernel(gemmGeom{TransA: !g.TransA, M: g.K, N: g.N, K: g.M, Batch: 1, LDA: g.LDA, LDB: g.LDC, LDC: g.LDB}, alpha, ap, dcp, 1, dbp, nil)
		} else { // dB (n×k) = alpha·dCᵀ·op(A)
			gemmKernel(gemmGeom{TransA: true, TransB: g.TransA, M: g.N, N: g.K, K: g.M, Batch: 1, LDA: g.LDC, LDB: g.LDA, LDC: g.LDB}, alpha, dcp, ap, 1, dbp, nil)
		}
	}
	return da, db
}

// inC marks the m×n entries of every batch member of C (the rest are gaps between rows or members).
func inC(g gemmGeom, n int) []bool {
	mark := make([]bool, n)
	for p := 0; p < g.Batch; p++ {
		for i := 0; i < g.M; i++ {
			for j := 0; j < g.N; j++ {
				mark[p*g.StrideC+i*g.LDC+j] = true
			}
		}
	}
	return mark
}

func TestGemmGradients(t *testing.T) {
	rng := newRNG(t)
	for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		for _, shape := range []struct {
			name       string
			batch      int
			pad, bcast bool
		}{{"dense", 1, false, false}, {"batched, padded ld and strides", 3, true, false}, {"batched, B broadcast (stride 0)", 2, true, true}} {
			t.Run(fmt.Sprintf("transA=%v transB=%v %s", tr[0], tr[1], shape.name), func(t *testing.T) {
				g := randomGeom(rng, tr[0], tr[1], shape.batch, shape.pad, shape.bcast)
				eA, eB, eC := g.Extents()
				a, b, c0 := randn(rng, eA, 1), randn(rng, eB, 1), randn(rng, eC, 1)
				bias := randn(rng, g.N, 1)
				gc := randn(rng, eC, 1)
				mark := inC(g, eC)
				for i := range gc {
					if !mark[i] {
						gc[i] = 0 // gaps are not outputs
					}
				}
				const alpha, beta = 0.7, -1.3
				c := make([]float64, eC)
				loss := func() float64 {
					copy(c, c0)
					gemmKernel(g, alpha, a, b, beta, c, bias)
					return dot(gc, c)
				}
				da, db := gemmBackward(g, alpha, a, b, gc, eA, eB)
				dc0 := append([]float64(nil), gc...)
				scaleKernel(dc0, beta)
				dbias := make([]float64, g.N)
				for p := 0; p < g.Batch; p++ {
					for i := 0; i < g.M; i++ {
						o := p*g.StrideC + i*g.LDC
						axpyKernel(dbias, gc[o:o+g.N], 1)
					}
				}
				checkGrad(t, rng, loss, gradInput{"A", a, da}, gradInput{"B", b, db}, gradInput{"C", c0, dc0}, gradInput{"bias", bias, dbias})
			})
		}
	}
}

// TestGemmBackend runs Backend.Gemm over dtypes, transposes, padding, batching, alpha/beta and bias against
// naiveGemm on the same (rounded) inputs, and checks that C's gaps keep their sentinel.
func TestGemmBackend(t *testing.T) {
	rng := newRNG(t)
	b := New()
	pairs := []struct{ in, out tensor.DType }{
		{tensor.F32, tensor.F32}, {tensor.BF16, tensor.BF16}, {tensor.F16, tensor.F16},
		{tensor.BF16, tensor.F32}, {tensor.F16, tensor.F32}, {tensor.F32, tensor.BF16},
	}
	for _, dt := range pairs {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			for _, batch := range []int{1, 5} {
				for _, beta := range []float32{0, 0.5} {
					name := fmt.Sprintf("%v→%v transA=%v transB=%v batch=%d beta=%v", dt.in, dt.out, tr[0], tr[1], batch, beta)
					t.Run(name, func(t *testing.T) {
						g := randomGeom(rng, tr[0], tr[1], batch, batch > 1, false)
						runGemmCase(t, rng, b, g, dt.in, dt.out, 1.5, beta, true)
					})
				}
			}
		}
	}
	t.Run("K=0 gives beta·C + bias", func(t *testing.T) {
		runGemmCase(t, rng, b, gemmGeom{M: 3, N: 5, K: 0, Batch: 1, LDA: 1, LDB: 5, LDC: 5}, tensor.F32, tensor.BF16, 1, 2, true)
	})
	t.Run("attention-shaped batch of small members runs in parallel", func(t *testing.T) {
		g := gemmGeom{TransB: true, M: 33, N: 33, K: 16, Batch: 12, LDA: 16, LDB: 16, LDC: 33, StrideA: 33 * 16, StrideB: 33 * 16, StrideC: 33 * 33}
		runGemmCase(t, rng, b, g, tensor.BF16, tensor.F32, 0.25, 0, false)
	})
	t.Run("large enough for gonum's block parallelism", func(t *testing.T) {
		g := gemmGeom{M: 130, N: 129, K: 67, Batch: 1, LDA: 67, LDB: 129, LDC: 129}
		runGemmCase(t, rng, b, g, tensor.F32, tensor.F32, 1, 1, true)
	})
}

// runGemmCase uploads random A, B, C (with NaN in C when beta == 0, which must not be read, and a sentinel in
// C's gaps) and compares Backend.Gemm with naiveGemm. The tolerance is FP32 accumulation's, plus half an ulp
// of a half C.
func runGemmCase(t *testing.T, rng *rand.Rand, b *Backend, g gemmGeom, in, out tensor.DType, alpha, beta float32, withBias bool) {
	t.Helper()
	eA, eB, eC := g.Extents()
	round := func(dt tensor.DType, v []float64) []float32 {
		r := f32s(v)
		for i := range r {
			r[i] = tensor.RoundTo(dt, r[i])
		}
		return r
	}
	a, bv, c := round(in, randn(rng, eA, 1)), round(in, randn(rng, eB, 1)), round(out, randn(rng, eC, 1))
	const sentinel = 7
	mark := inC(g, eC)
	for i := range c {
		switch {
		case !mark[i]:
			c[i] = sentinel
		case beta == 0:
			c[i] = float32(math.NaN())
		}
	}
	var bias []float32
	var Bias *tensor.Tensor
	if withBias {
		bias = round(tensor.BF16, randn(rng, g.N, 1))
		Bias = put(t, b, tensor.BF16, bias, g.N)
	}
	A, B, C := put(t, b, in, a, eA), put(t, b, in, bv, eB), put(t, b, out, c, eC)
	args := tensor.GemmArgs{TransA: g.TransA, TransB: g.TransB, M: g.M, N: g.N, K: g.K, A: A, B: B, C: C,
		LDA: g.LDA, LDB: g.LDB, LDC: g.LDC, StrideA: g.StrideA, StrideB: g.StrideB, StrideC: g.StrideC,
		Batch: g.Batch, Alpha: alpha, Beta: beta, Bias: Bias}
	if err := b.Gemm(args); err != nil {
		t.Fatal(err)
	}
	want := f64(c)
	var biasF []float64
	if withBias {
		biasF = f64(bias)
	}
	naiveGemm(g, float64(alpha), f64(a), f64(bv), float64(beta), want, biasF)
	got := get(t, b, C)
	tol := 1e-5 * math.Sqrt(float64(max(g.K, 1)))
	if out.IsHalf() {
		tol = 1.0 / 256
		if out == tensor.F16 {
			tol = 1.0 / 2048
		}
	}
	for i := range got {
		if !mark[i] {
			if got[i] != sentinel {
				t.Fatalf("gap element %d of C was written: %v", i, got[i])
			}
			continue
		}
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol*max(1, math.Abs(want[i]))) {
			t.Fatalf("%v: C[%d] = %v, want %v", g, i, got[i], want[i])
		}
	}
}

func TestGemmErrors(t *testing.T) {
	b := New()
	f := func(dt tensor.DType, n int) *tensor.Tensor { return mustAlloc(t, b, dt, n) }
	base := func() tensor.GemmArgs {
		return tensor.GemmArgs{M: 2, N: 3, K: 4, A: f(tensor.F32, 8), B: f(tensor.F32, 12), C: f(tensor.F32, 6), Alpha: 1}
	}
	cases := []struct {
		name   string
		modify func(a *tensor.GemmArgs)
		want   error
	}{
		{"A and B of different dtypes", func(a *tensor.GemmArgs) { a.B = f(tensor.BF16, 12) }, tensor.ErrDType},
		{"A too small for M×K", func(a *tensor.GemmArgs) { a.A = f(tensor.F32, 7) }, tensor.ErrShape},
		{"C too small for the batch", func(a *tensor.GemmArgs) { a.Batch, a.StrideA, a.StrideB, a.StrideC = 2, 0, 0, 6 }, tensor.ErrShape},
		{"LDA smaller than the stored columns", func(a *tensor.GemmArgs) { a.LDA = 3 }, tensor.ErrArgument},
		{"batch members overlapping in C", func(a *tensor.GemmArgs) { a.Batch, a.StrideC = 2, 5 }, tensor.ErrArgument},
		{"negative K", func(a *tensor.GemmArgs) { a.K = -1 }, tensor.ErrArgument},
		{"bias of the wrong length", func(a *tensor.GemmArgs) { a.Bias = f(tensor.F32, 2) }, tensor.ErrShape},
		{"integer C", func(a *tensor.GemmArgs) { a.C = f(tensor.I32, 6) }, tensor.ErrDType},
		{"nil B", func(a *tensor.GemmArgs) { a.B = nil }, tensor.ErrArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := base()
			c.modify(&a)
			if err := b.Gemm(a); !errorIs(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	if err := b.Gemm(base()); err != nil {
		t.Fatalf("the unmodified arguments must be valid: %v", err)
	}
}
