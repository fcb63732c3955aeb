//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// gemmCase is one GEMM run on the GPU and on the CPU reference with identical (dtype-rounded) inputs.
type gemmCase struct {
	ab, c, bias    tensor.DType // bias Invalid: none
	m, n, k, batch int
	transA, transB bool
	pad            int // extra elements per row (ld) and per batch member (stride)
	offset         int // element offset of every view (0: aligned)
	beta           float32
	broadcastB     bool
}

func (c gemmCase) String() string {
	bias := "none"
	if c.bias != tensor.Invalid {
		bias = c.bias.String()
	}
	return fmt.Sprintf("%v→%v %dx%dx%d batch=%d tA=%v tB=%v pad=%d off=%d beta=%v bias=%s bcastB=%v",
		c.ab, c.c, c.m, c.n, c.k, c.batch, c.transA, c.transB, c.pad, c.offset, c.beta, bias, c.broadcastB)
}

// gemmCases covers every dtype combination the contract allows (A/B F32, F16 or BF16; C F32 or half,
// including F32 inputs into a half C), odd and aligned shapes, the four transposes, batches with padded lds
// and strides, a broadcast B, beta 0 and ≠ 0, and biases of C's dtype and of another, cycling the variants
// so each appears with each dtype pair.
func gemmCases() []gemmCase {
	pairs := [][2]tensor.DType{
		{tensor.F32, tensor.F32}, {tensor.F32, tensor.BF16}, {tensor.F32, tensor.F16},
		{tensor.F16, tensor.F16}, {tensor.F16, tensor.F32},
		{tensor.BF16, tensor.BF16}, {tensor.BF16, tensor.F32},
	}
	shapes := [][3]int{{1, 1, 1}, {3, 7, 33}, {33, 65, 17}, {64, 128, 96}, {5, 3, 300}, {128, 768, 64}}
	var out []gemmCase
	v := 0
	for _, p := range pairs {
		for _, s := range shapes {
			for rep := 0; rep < 4; rep++ {
				c := gemmCase{ab: p[0], c: p[1], m: s[0], n: s[1], k: s[2], batch: 1}
				c.transA, c.transB = v&1 == 1, v&2 == 2
				if v%3 == 1 {
					c.batch, c.pad = 3, 1+v%4
				}
				if v%5 == 2 {
					c.beta = 0.5
				}
				switch v % 4 {
				case 1:
					c.bias = p[1]
				case 3:
					c.bias = tensor.F32
				}
				if v%7 == 3 {
					c.offset = 3 // unaligned views, as tensortest uses
				}
				c.broadcastB = c.batch > 1 && v%2 == 0
				out = append(out, c)
				v++
			}
		}
	}
	return out
}

// gemmTol is the relative tolerance for C's dtype: FP32 accumulation-order noise, or one unit in the last
// place of a half C (the product is rounded once in both backends).
func gemmTol(d tensor.DType, k int) float64 {
	switch d {
	case tensor.F16:
		return 1e-3
	case tensor.BF16:
		return 8e-3
	}
	return 2e-6 * math.Sqrt(float64(k)+1)
}

func TestGemmAgainstCPU(t *testing.T) {
	gpu := openOrSkip(t)
	ref := cpu.New()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range gemmCases() {
		t.Run(c.String(), func(t *testing.T) { runGemmCase(t, gpu, ref, rng, c) })
	}
	plans, staged := gpu.GemmStats()
	t.Logf("%d cuBLASLt plans, %d GEMMs through the staged path: %v", plans, staged, cuda.StagedGemmReasons(gpu))
}

// runGemmCase uploads the same inputs to both backends (C poisoned with NaN on the GPU when beta = 0, the gaps
// between rows filled with a sentinel that must survive) and compares every element of C.
func runGemmCase(t *testing.T, gpu *cuda.Backend, ref tensor.Backend, rng *rand.Rand, c gemmCase) {
	ar, ac, br, bc := c.m, c.k, c.k, c.n
	if c.transA {
		ar, ac = c.k, c.m
	}
	if c.transB {
		br, bc = c.n, c.k
	}
	lda, ldb, ldc := ac+c.pad, bc+c.pad, c.n+c.pad
	sa, sb, sc := ar*lda+c.pad, br*ldb+c.pad, c.m*ldc+c.pad
	if c.broadcastB {
		sb = 0
	}
	ext := func(stride, rows, ld, cols int) int { return (c.batch-1)*stride + (rows-1)*ld + cols }
	ea, eb, ec := ext(sa, ar, lda, ac), ext(sb, br, ldb, bc), ext(sc, c.m, ldc, c.n)
	normal := func(n int, d tensor.DType) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = tensor.RoundTo(d, float32(rng.NormFloat64()))
		}
		return v
	}
	av, bv, cv := normal(ea, c.ab), normal(eb, c.ab), normal(ec, c.c)
	const sentinel = -7.25
	written := make([]bool, ec)
	for p := 0; p < c.batch; p++ {
		for i := 0; i < c.m; i++ {
			for j := 0; j < c.n; j++ {
				written[p*sc+i*ldc+j] = true
			}
		}
	}
	gpuC := make([]float32, ec)
	for i := range cv {
		switch {
		case !written[i]:
			cv[i] = sentinel
			gpuC[i] = sentinel
		case c.beta == 0:
			gpuC[i] = nan
		default:
			gpuC[i] = cv[i]
		}
	}
	var biasV []float32
	if c.bias != tensor.Invalid {
		biasV = normal(c.n, c.bias)
	}
	args := func(b tensor.Backend, cvals []float32) (tensor.GemmArgs, func()) {
		var frees []*tensor.Tensor
		up := func(d tensor.DType, v []float32) *tensor.Tensor {
			parent, err := b.Alloc(d, len(v)+c.offset)
			if err != nil {
				t.Fatal(err)
			}
			frees = append(frees, parent)
			x, err := parent.View(c.offset, len(v))
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Upload(x, v); err != nil {
				t.Fatal(err)
			}
			return x
		}
		g := tensor.GemmArgs{TransA: c.transA, TransB: c.transB, M: c.m, N: c.n, K: c.k,
			A: up(c.ab, av), B: up(c.ab, bv), C: up(c.c, cvals), LDA: lda, LDB: ldb, LDC: ldc,
			StrideA: sa, StrideB: sb, StrideC: sc, Batch: c.batch, Alpha: 0.75, Beta: c.beta}
		if biasV != nil {
			g.Bias = up(c.bias, biasV)
		}
		return g, func() {
			for _, x := range frees {
				b.Free(x)
			}
		}
	}
	ga, gfree := args(gpu, gpuC)
	defer gfree()
	ra, rfree := args(ref, cv)
	defer rfree()
	if err := gpu.Gemm(ga); err != nil {
		t.Fatalf("GPU Gemm: %v", err)
	}
	if err := ref.Gemm(ra); err != nil {
		t.Fatalf("CPU Gemm: %v", err)
	}
	got, want := make([]float32, ec), make([]float32, ec)
	if err := gpu.Download(got, ga.C); err != nil {
		t.Fatal(err)
	}
	if err := ref.Download(want, ra.C); err != nil {
		t.Fatal(err)
	}
	var ss float64
	for i, w := range want {
		if written[i] {
			ss += float64(w) * float64(w)
		}
	}
	rms := math.Sqrt(ss / float64(c.m*c.n*c.batch))
	tol := gemmTol(c.c, c.k)
	for i := range got {
		if !written[i] {
			if got[i] != sentinel {
				t.Fatalf("element %d between rows of C was overwritten: %v", i, got[i])
			}
			continue
		}
		if d := math.Abs(float64(got[i] - want[i])); !(d <= tol*(math.Abs(float64(want[i]))+rms)) {
			t.Fatalf("C[%d] = %v, CPU reference %v (tolerance %g·(|ref| + rms %.3g))", i, got[i], want[i], tol, rms)
		}
	}
}

// TestGemmTF32IsOptIn checks that an F32 GEMM is true FP32 by default and uses TF32 (a visibly larger error,
// still within TF32's ~1e-3) only when allowed.
func TestGemmTF32IsOptIn(t *testing.T) {
	gpu := openOrSkip(t)
	defer gpu.SetAllowTF32(false)
	const m, n, k = 256, 256, 1024
	rng := rand.New(rand.NewPCG(3, 4))
	av, bv := make([]float32, m*k), make([]float32, k*n)
	for i := range av {
		av[i] = float32(rng.NormFloat64())
	}
	for i := range bv {
		bv[i] = float32(rng.NormFloat64())
	}
	exact := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for p := 0; p < k; p++ {
			x := float64(av[i*k+p])
			for j := 0; j < n; j++ {
				exact[i*n+j] += x * float64(bv[p*n+j])
			}
		}
	}
	relErr := func(allow bool) float64 {
		gpu.SetAllowTF32(allow)
		a, _ := gpu.Alloc(tensor.F32, m, k)
		b, _ := gpu.Alloc(tensor.F32, k, n)
		c, _ := gpu.Alloc(tensor.F32, m, n)
		defer gpu.Free(a)
		defer gpu.Free(b)
		defer gpu.Free(c)
		if err := gpu.Upload(a, av); err != nil {
			t.Fatal(err)
		}
		if err := gpu.Upload(b, bv); err != nil {
			t.Fatal(err)
		}
		if err := gpu.Gemm(tensor.GemmArgs{M: m, N: n, K: k, A: a, B: b, C: c, Alpha: 1}); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, m*n)
		if err := gpu.Download(got, c); err != nil {
			t.Fatal(err)
		}
		var num, den float64
		for i, e := range exact {
			num += (float64(got[i]) - e) * (float64(got[i]) - e)
			den += e * e
		}
		return math.Sqrt(num / den)
	}
	fp32, tf32 := relErr(false), relErr(true)
	t.Logf("relative error: FP32 %.3g, TF32 %.3g", fp32, tf32)
	if fp32 > 1e-5 {
		t.Errorf("default F32 GEMM has relative error %.3g; true FP32 stays under 1e-5 (is TF32 on?)", fp32)
	}
	if tf32 > 5e-3 {
		t.Errorf("TF32 GEMM has relative error %.3g, more than TF32's precision explains", tf32)
	}
	if tf32 < 3*fp32 {
		t.Logf("TF32 error %.3g is not clearly above FP32's %.3g: cuBLASLt may have kept FP32 for this shape", tf32, fp32)
	}
}

// TestGemmF32Rules runs the F32 → F32 cases of gemmCases with every true-FP32 GEMM on cuBLASLt
// (TUNE_GEMM_F32=lt; TestGemmAgainstCPU runs them under the default, cublasSgemm for the unbatched products
// without a bias) against the CPU, and checks under both choices that a product is true FP32 (relative error
// under 1e-5 at K = 3072, where TF32 gives ~1e-3) and gives the same bits when run twice, with and without a
// bias.
func TestGemmF32Rules(t *testing.T) {
	gpu := openOrSkip(t)
	ref := cpu.New()
	const m, n, k = 192, 160, 3072
	rng := rand.New(rand.NewPCG(9, 10))
	av, bv, bias := make([]float32, m*k), make([]float32, n*k), make([]float32, n)
	for _, v := range [][]float32{av, bv, bias} {
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
	}
	exact := make([]float64, m*n) // without the bias
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += float64(av[i*k+p]) * float64(bv[j*k+p])
			}
			exact[i*n+j] = s
		}
	}
	for _, rule := range []string{"default", "lt"} {
		t.Run(rule, func(t *testing.T) {
			defer cuda.SetGemmF32Lt(rule == "lt")()
			for _, c := range gemmCases() {
				if rule == "lt" && c.ab == tensor.F32 && c.c == tensor.F32 {
					t.Run(c.String(), func(t *testing.T) { runGemmCase(t, gpu, ref, rng, c) })
				}
			}
			up := func(v []float32) *tensor.Tensor {
				x, err := gpu.Alloc(tensor.F32, len(v))
				if err != nil {
					t.Fatal(err)
				}
				if err := gpu.Upload(x, v); err != nil {
					t.Fatal(err)
				}
				return x
			}
			a, b, bb, c := up(av), up(bv), up(bias), up(make([]float32, m*n))
			defer func() {
				for _, x := range []*tensor.Tensor{a, b, bb, c} {
					gpu.Free(x)
				}
			}()
			for _, withBias := range []bool{false, true} {
				args := tensor.GemmArgs{TransB: true, M: m, N: n, K: k, A: a, B: b, C: c, Alpha: 1}
				if withBias {
					args.Bias = bb
				}
				var runs [2][]float32
				for r := range runs {
					if err := gpu.Gemm(args); err != nil {
						t.Fatal(err)
					}
					runs[r] = make([]float32, m*n)
					if err := gpu.Download(runs[r], c); err != nil {
						t.Fatal(err)
					}
				}
				var num, den float64
				for i, e := range exact {
					if withBias {
						e += float64(bias[i%n])
					}
					if math.Float32bits(runs[0][i]) != math.Float32bits(runs[1][i]) {
						t.Fatalf("bias %v: C[%d] = %v then %v: not the same bits run to run", withBias, i, runs[0][i], runs[1][i])
					}
					num += (float64(runs[0][i]) - e) * (float64(runs[0][i]) - e)
					den += e * e
				}
				if rel := math.Sqrt(num / den); rel > 1e-5 {
					t.Errorf("bias %v: relative error %.3g; true FP32 stays under 1e-5 (TF32?)", withBias, rel)
				}
			}
		})
	}
}
