package cpu

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// withGemmPath runs fn with the FP32 GEMM forced to path k (nil: gonum), restoring the selection after.
func withGemmPath(t *testing.T, k *microKernel, fn func(t *testing.T)) {
	t.Helper()
	saved, savedSmall := gemmPath, smallGemmOn
	gemmPath, smallGemmOn = k, false // the micro-kernel itself, also on the shapes the small path would take
	defer func() { gemmPath, smallGemmOn = saved, savedSmall }()
	fn(t)
}

// gemmPathsToTest is every path this processor can run, gonum included.
func gemmPathsToTest() []*microKernel { return append(availableKernels(), nil) }

func pathName(k *microKernel) string {
	if k == nil {
		return "gonum"
	}
	return k.name
}

// TestGemmPaths runs the Gemm cases of TestGemmBackend on every FP32 path, plus shapes that cross every block
// boundary of the packed GEMM (K > gemmKC, M > gemmMC, N > gemmNC, tails of MR and NR) with padded leading
// dimensions and unaligned offsets, against the FP64 reference.
func TestGemmPaths(t *testing.T) {
	for _, k := range gemmPathsToTest() {
		t.Run(pathName(k), func(t *testing.T) {
			withGemmPath(t, k, func(t *testing.T) { gemmPathCases(t) })
		})
	}
}

// TestGemmSmallPath runs TestGemmPaths's cases with the small-product path on (gemm_small.go), which takes every
// product of them whose B fits smallGemmMaxB.
func TestGemmSmallPath(t *testing.T) {
	if !hasSIMD || gemmPath == nil || gemmPath.name != "avx512" {
		t.Skip("the small path needs the AVX-512 kernels")
	}
	if !useSmallGemm(gemmGeom{M: 200, N: 70, K: 600, Batch: 1}) || useSmallGemm(gemmGeom{M: 25, N: 3100, K: 300, Batch: 1}) {
		t.Fatal("useSmallGemm does not take the products it is meant to")
	}
	gemmPathCases(t)
}

// gemmPathCases is the body of TestGemmPaths under the current path selection.
func gemmPathCases(t *testing.T) {
	rng := newRNG(t)
	b := New()
	shapes := []gemmGeom{
		{M: 1, N: 1, K: 1},
		{M: 13, N: 33, K: 7},
		{M: 97, N: 65, K: 257},
		{M: 25, N: 3100, K: 3},
		{M: 200, N: 70, K: 600},
	}
	for _, s := range shapes {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
				g := s
				g.TransA, g.TransB, g.Batch = tr[0], tr[1], 1
				_, ac := g.StoredA()
				_, bc := g.StoredB()
				g.LDA, g.LDB, g.LDC = ac+1, bc+3, g.N+2
				name := fmt.Sprintf("%dx%dx%d/transA=%v/transB=%v/%v", g.M, g.N, g.K, tr[0], tr[1], dt)
				t.Run(name, func(t *testing.T) { runGemmCase(t, rng, b, g, dt, tensor.F32, 0.75, 0.5, true) })
				if dt == tensor.F32 { // beta 0 (C not read, the bias written first) and 1 (C accumulated)
					t.Run(name+"/beta=0", func(t *testing.T) { runGemmCase(t, rng, b, g, dt, tensor.F32, 0.75, 0, true) })
					t.Run(name+"/beta=1", func(t *testing.T) { runGemmCase(t, rng, b, g, dt, tensor.F32, 1, 1, false) })
				}
			}
		}
	}
	t.Run("batched, padded strides", func(t *testing.T) {
		g := randomGeom(rng, false, true, 5, true, false)
		runGemmCase(t, rng, b, g, tensor.F32, tensor.F32, 1, 0, false)
	})
	t.Run("batched, B broadcast, bias", func(t *testing.T) {
		g := randomGeom(rng, true, true, 3, true, true)
		runGemmCase(t, rng, b, g, tensor.F32, tensor.F32, 1, 0, true)
	})
}

// TestGemmPathDeterministic checks that the packed paths give the same bits whatever the core count.
func TestGemmPathDeterministic(t *testing.T) {
	for _, k := range availableKernels() {
		t.Run(k.name, func(t *testing.T) {
			withGemmPath(t, k, func(t *testing.T) {
				rng := newRNG(t)
				m, n, kk := 300, 200, 700
				a, bb := f32s(randn(rng, m*kk, 1)), f32s(randn(rng, kk*n, 1))
				run := func(procs int) []float32 {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
					c := make([]float32, m*n)
					sgemmPacked(k, false, false, m, n, kk, 1, a, kk, bb, n, 0, c, n, true)
					return c
				}
				one, many := run(1), run(4)
				for i := range one {
					if math.Float32bits(one[i]) != math.Float32bits(many[i]) {
						t.Fatalf("C[%d] = %v with 1 core, %v with 4", i, one[i], many[i])
					}
				}
			})
		})
	}
}

// TestGemmPathNaN: on the packed paths an Inf in B meeting a zero of A gives NaN, as cuBLAS does.
func TestGemmPathNaN(t *testing.T) {
	for _, k := range availableKernels() {
		t.Run(k.name, func(t *testing.T) {
			a := []float32{0, 1}
			bb := []float32{float32(math.Inf(1)), 2}
			c := []float32{5}
			sgemmPacked(k, false, false, 1, 1, 2, 1, a, 2, bb, 1, 0, c, 1, false)
			if !math.IsNaN(float64(c[0])) {
				t.Fatalf("0·Inf + 1·2 = %v, want NaN", c[0])
			}
		})
	}
}

func TestSelectGemmPath(t *testing.T) {
	if k, err := selectGemmPath("gonum"); k != nil || err != nil {
		t.Fatalf("gonum: %v, %v", k, err)
	}
	if _, err := selectGemmPath("vax"); err == nil || !strings.Contains(err.Error(), `TUNE_CPU_GEMM="vax" is not a GEMM path (auto, avx512, avx2 or gonum)`) {
		t.Fatalf("an unknown path must be refused as unknown: %v", err)
	}
	for _, k := range availableKernels() {
		// Any case (tester4: AVX2 was "not available on this processor" on one that has AVX2).
		for _, name := range []string{k.name, strings.ToUpper(k.name)} {
			if got, err := selectGemmPath(name); got != k || err != nil {
				t.Fatalf("%s: %v, %v", name, got, err)
			}
		}
	}
}
