//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// TestGemmTableAgainstCPU runs every GEMM table row for this GPU and cuBLASLt (cuda/gemmtable.json) at its
// shape: the plan must take the table's algorithm, two runs must give the same bits, four rows of C must match
// a float64 CPU reference within gemmTol (as TestGemmAgainstCPU), and the whole C must be as close to heuristic
// #0's (TUNE_GEMM_TABLE=off) as the tolerance allows.
func TestGemmTableAgainstCPU(t *testing.T) {
	gpu := openOrSkip(t)
	// Load cuBLASLt with one GEMM (not thin: no dimension ≤ 64), then read the rows for the library it loaded.
	var small [3]*tensor.Tensor
	for i := range small {
		x, err := gpu.Alloc(tensor.BF16, 128*128)
		if err != nil {
			t.Fatal(err)
		}
		defer gpu.Free(x)
		small[i] = x
	}
	if err := gpu.Gemm(tensor.GemmArgs{M: 128, N: 128, K: 128, A: small[0], B: small[1], C: small[2], Alpha: 1, Batch: 1}); err != nil {
		t.Fatal(err)
	}
	rows, err := cuda.GemmTableShapes(gpu)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Skip("the GEMM table has no rows for this GPU and cuBLASLt")
	}
	for _, r := range rows {
		t.Run(tableName(r), func(t *testing.T) { runTableRow(t, gpu, r) })
	}
}

func tableName(r cuda.GemmTableShape) string {
	tr := map[bool]string{false: "N", true: "T"}
	s := fmt.Sprintf("%v_%dx%dx%d_%s%s_%v", r.AB, r.M, r.N, r.K, tr[r.TransA], tr[r.TransB], r.C)
	if r.Bias != tensor.Invalid {
		s += "_bias" + r.Bias.String()
	}
	return s
}

func runTableRow(t *testing.T, gpu *cuda.Backend, r cuda.GemmTableShape) {
	ar, ac, br, bc := r.M, r.K, r.K, r.N
	if r.TransA {
		ar, ac = r.K, r.M
	}
	if r.TransB {
		br, bc = r.N, r.K
	}
	ext := func(rows, ld, cols int) int { return (rows-1)*ld + cols }
	var frees []*tensor.Tensor
	defer func() {
		for _, x := range frees {
			gpu.Free(x)
		}
	}()
	alloc := func(d tensor.DType, n int) *tensor.Tensor {
		x, err := gpu.Alloc(d, n)
		if err != nil {
			t.Fatal(err)
		}
		frees = append(frees, x)
		return x
	}
	fill := func(x *tensor.Tensor, seed uint64) []float32 {
		v, err := cuda.FillPatternForTest(gpu, x, seed)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	nc := ext(r.M, r.LDC, r.N)
	A, B := alloc(r.AB, ext(ar, r.LDA, ac)), alloc(r.AB, ext(br, r.LDB, bc))
	C0, C1, C2, Ch := alloc(r.C, nc), alloc(r.C, nc), alloc(r.C, nc), alloc(r.C, nc)
	pa, pb, pc := fill(A, 1), fill(B, 2), fill(C0, 3)
	var bias *tensor.Tensor
	var pbias []float32
	if r.Bias != tensor.Invalid {
		bias = alloc(r.Bias, r.N)
		pbias = fill(bias, 4)
	}
	const alpha, beta = 0.75, 0.5
	run := func(c *tensor.Tensor) {
		if err := gpu.Copy(c, C0); err != nil {
			t.Fatal(err)
		}
		if err := gpu.Gemm(tensor.GemmArgs{TransA: r.TransA, TransB: r.TransB, M: r.M, N: r.N, K: r.K, A: A, B: B, C: c,
			LDA: r.LDA, LDB: r.LDB, LDC: r.LDC, Bias: bias, Alpha: alpha, Beta: beta, Batch: 1}); err != nil {
			t.Fatal(err)
		}
	}
	cuda.ForgetGemmPlans(gpu)
	before := cuda.GemmPlansFromTable(gpu)
	run(C1)
	if got := cuda.GemmPlansFromTable(gpu) - before; got != 1 {
		t.Fatalf("%d plans took the table's algorithm (%s), want 1: cuBLASLt no longer accepts it", got, r.Config)
	}
	run(C2)
	if differ, _, _, err := cuda.DiffForTest(gpu, C2, C1); err != nil || differ != 0 {
		t.Fatalf("two runs of %s differ in %d elements (err %v)", r.Config, differ, err)
	}
	restore := cuda.SetGemmTable(false)
	cuda.ForgetGemmPlans(gpu)
	run(Ch)
	restore()
	cuda.ForgetGemmPlans(gpu)
	tol := gemmTol(r.C, r.K)
	_, dmax, ymax, err := cuda.DiffForTest(gpu, C1, Ch)
	if err != nil {
		t.Fatal(err)
	}
	if !(float64(dmax) <= 2*tol*float64(ymax)) {
		t.Errorf("table algorithm vs heuristic #0: max |Δ| %g, max |C| %g (tolerance 2·%g·max|C|)", dmax, ymax, tol)
	}
	// Four rows against a float64 reference computed from the fill patterns.
	at := func(p []float32, e int) float64 { return float64(p[e%len(p)]) }
	elemA := func(i, k int) float64 {
		if r.TransA {
			return at(pa, k*r.LDA+i)
		}
		return at(pa, i*r.LDA+k)
	}
	elemB := func(k, j int) float64 {
		if r.TransB {
			return at(pb, j*r.LDB+k)
		}
		return at(pb, k*r.LDB+j)
	}
	for _, i := range []int{0, r.M / 3, 2 * r.M / 3, r.M - 1} {
		row, err := C1.View(i*r.LDC, r.N)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, r.N)
		if err := gpu.Download(got, row); err != nil {
			t.Fatal(err)
		}
		want := make([]float64, r.N)
		var ss float64
		for j := range want {
			var s float64
			for k := range r.K {
				s += elemA(i, k) * elemB(k, j)
			}
			v := alpha*s + beta*at(pc, i*r.LDC+j)
			if pbias != nil {
				v += at(pbias, j)
			}
			want[j] = v
			ss += v * v
		}
		rms := math.Sqrt(ss / float64(r.N))
		for j, w := range want {
			if d := math.Abs(float64(got[j]) - w); !(d <= tol*(math.Abs(w)+rms)) {
				t.Fatalf("C[%d][%d] = %v, float64 reference %v (tolerance %g·(|ref| + rms %.3g)), algorithm %s", i, j, got[j], w, tol, rms, r.Config)
			}
		}
	}
}
