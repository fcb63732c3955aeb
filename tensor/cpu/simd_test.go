package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// simdInputs returns n values of N(0, scale) with the edge cases of the SIMD kernels mixed in: the table's
// ends (±8 and just inside), huge values, ±Inf, NaN, ±0.
func simdInputs(n int, scale float64) []float32 {
	rng := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	special := []float32{8, -8, math.Nextafter32(8, 0), math.Nextafter32(-8, 0), 1e30, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0, float32(math.Copysign(0, -1))}
	for i, v := range special {
		if j := i * 37; j < n {
			x[j] = v
		}
	}
	return x
}

// TestGELUSIMDMatchesScalar checks that the AVX-512 GELU and GELU backward give exactly the scalar table's bits
// on every length up to 40 (the masked tail) and on a long vector with the edge cases.
func TestGELUSIMDMatchesScalar(t *testing.T) {
	if !hasSIMD {
		t.Skip("no AVX-512 kernels on this processor")
	}
	long := simdInputs(4099, 4)
	dout := simdInputs(4099, 1)
	for n := 0; n <= 40; n++ {
		checkGELU(t, n, long[:n], dout[:n])
	}
	checkGELU(t, len(long), long, dout)
	// all inside the table: the fast return
	in := simdInputs(1000, 1)
	for i, v := range in {
		if !inNormTable(float64(v)) {
			in[i] = 0.5
		}
	}
	checkGELU(t, len(in), in, dout[:len(in)])
}

// TestGELUSIMDInPlace runs the SIMD GELU in place (out = x, and the backward's dx = dout, as the transformer
// layer calls it) with elements outside the table, which the scalar fix-up computes from the inputs the
// kernels must not have overwritten.
func TestGELUSIMDInPlace(t *testing.T) {
	for _, n := range []int{7, 8, 24, 100, 333} {
		x := simdInputs(n, 2)
		d := simdInputs(n, 1)
		want := make([]float32, n)
		for i, v := range x {
			f := float64(v)
			c, p := normCDFPDF(f)
			want[i] = d[i] * float32(c+f*p)
		}
		geluBackwardF32(d, d, x)
		for i := range d {
			if math.Float32bits(d[i]) != math.Float32bits(want[i]) && !(d[i] != d[i]) {
				t.Fatalf("n %d i %d: %v want %v", n, i, d[i], want[i])
			}
		}
		y := append([]float32(nil), x...)
		geluF32(y, y)
		for i, v := range x {
			f := float64(v)
			w := float32(f * normCDF(f))
			if math.Float32bits(y[i]) != math.Float32bits(w) && !(w != w) {
				t.Fatalf("fwd n %d i %d: %v want %v", n, i, y[i], w)
			}
		}
	}
}

func checkGELU(t *testing.T, n int, x, dout []float32) {
	t.Helper()
	got, gotd := make([]float32, n), make([]float32, n)
	geluF32(got, x)
	geluBackwardF32(gotd, dout, x)
	for i, v := range x {
		f := float64(v)
		want := float32(f * normCDF(f))
		c, p := normCDFPDF(f)
		wantd := dout[i] * float32(c+f*p)
		if math.Float32bits(got[i]) != math.Float32bits(want) && !(isNaN32(got[i]) && isNaN32(want)) {
			t.Fatalf("n %d: GELU(%v) = %v, scalar %v", n, v, got[i], want)
		}
		if math.Float32bits(gotd[i]) != math.Float32bits(wantd) && !(isNaN32(gotd[i]) && isNaN32(wantd)) {
			t.Fatalf("n %d: GELU'(%v)·%v = %v, scalar %v", n, v, dout[i], gotd[i], wantd)
		}
	}
}

func isNaN32(x float32) bool { return x != x }

// TestDropoutUnalignedStart checks the 128-at-a-time dropout (16 Philox blocks from any block boundary, the
// AVX-512 products) against tensor.PhiloxKeep for chunks that start at every residue of the stream index mod
// 128, with NaN inputs staying NaN where dropped.
func TestDropoutUnalignedStart(t *testing.T) {
	x := simdInputs(300, 2)
	for first := 0; first < 136; first++ {
		out := make([]float32, len(x))
		dropoutKernel(out, x, 0.3, 99, 5, first)
		for i, v := range x {
			want := float32(0)
			if tensor.PhiloxKeep(99, 5, first+i, 0.3) {
				want = 1 / (1 - float32(0.3))
			}
			want *= v
			if math.Float32bits(out[i]) != math.Float32bits(want) && !(isNaN32(out[i]) && isNaN32(want)) {
				t.Fatalf("first %d: element %d = %v, want %v", first, i, out[i], want)
			}
		}
	}
}

// TestExpShiftSum checks the vectorised exp of the attention softmax against math.Exp: at most 2 ulp over
// [−103, 0] (gradual underflow below −87.3 to the same denormal ±1 unit), exactly 0 for −Inf and below −104,
// NaN for NaN, and a sum within FP32 rounding of the float64 sum.
func TestExpShiftSum(t *testing.T) {
	if !hasSIMD {
		t.Skip("no AVX-512 kernels on this processor")
	}
	for _, n := range []int{0, 1, 5, 16, 17, 33, 1000} {
		x := make([]float32, n)
		for i := range x {
			x[i] = -float32(i) * 103 / float32(max(1, n-1))
		}
		orig := append([]float32(nil), x...)
		sum := expShiftSumAVX512(ptr(x), n, 0.25)
		var want float64
		for i, v := range orig {
			e := math.Exp(float64(v - 0.25))
			want += float64(float32(e))
			w := float32(e)
			if d := ulps(x[i], w); d > 2 {
				t.Fatalf("n %d: exp(%v) = %v, want %v (%d ulp)", n, v-0.25, x[i], w, d)
			}
		}
		if math.Abs(float64(sum)-want) > 1e-6*want {
			t.Fatalf("n %d: sum %v, want %v", n, sum, want)
		}
	}
	x := []float32{float32(math.Inf(-1)), -200, float32(math.NaN()), 0, -1e30}
	expShiftSumAVX512(&x[0], len(x), 0)
	if x[0] != 0 || x[1] != 0 || !isNaN32(x[2]) || x[3] != 1 || x[4] != 0 {
		t.Fatalf("exp of −Inf, −200, NaN, 0, −1e30 = %v", x)
	}
}

func ptr(x []float32) *float32 {
	if len(x) == 0 {
		return nil
	}
	return &x[0]
}

// ulps is the distance between two finite non-negative float32 values in units in the last place.
func ulps(a, b float32) int64 {
	d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
	if d < 0 {
		d = -d
	}
	return d
}

// TestSgemmSmall checks the unpacked small product against a float64 loop for row-major and transposed A,
// accumulation, alpha, odd sizes and row strides larger than the width.
func TestSgemmSmall(t *testing.T) {
	if !hasSIMD {
		t.Skip("no AVX-512 kernels on this processor")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range [][3]int{{1, 1, 1}, {4, 16, 16}, {5, 17, 3}, {20, 20, 16}, {7, 33, 0}, {13, 48, 31}, {64, 16, 64}} {
		m, n, k := s[0], s[1], s[2]
		for _, tA := range []bool{false, true} {
			for _, acc := range []bool{false, true} {
				lda, ldb, ldc := k+3, n+2, n+5
				rsa, csa := lda, 1
				if tA {
					lda = m + 3
					rsa, csa = 1, lda
				}
				a := randf(rng, max(m, k)*lda+1)
				b := randf(rng, k*ldb+1)
				c := randf(rng, m*ldc+1)
				want := append([]float32(nil), c...)
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						var sum float64
						for p := 0; p < k; p++ {
							sum += float64(a[i*rsa+p*csa]) * float64(b[p*ldb+j])
						}
						v := 0.5 * sum
						if acc {
							v += float64(want[i*ldc+j])
						}
						want[i*ldc+j] = float32(v)
					}
				}
				sgemmSmallAVX512(m, n, k, &a[0], rsa, csa, &b[0], ldb, &c[0], ldc, 0.5, acc)
				for i := range c {
					if math.Abs(float64(c[i]-want[i])) > 1e-5*(1+math.Abs(float64(want[i]))) {
						t.Fatalf("%dx%dx%d tA %v acc %v: c[%d] = %v, want %v", m, n, k, tA, acc, i, c[i], want[i])
					}
				}
			}
		}
	}
}

func randf(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// TestBiasGradF32 checks the F32 bias gradient (the one-row product on AVX-512) against a float64 sum on
// shapes with column tails, accumulating into a non-zero dbias.
func TestBiasGradF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range [][2]int{{1, 1}, {640, 64}, {37, 19}, {3, 40}} {
		n, c := s[0], s[1]
		dy, db := randf(rng, n*c), randf(rng, c)
		want := make([]float64, c)
		for j := range want {
			want[j] = float64(db[j])
			for r := 0; r < n; r++ {
				want[j] += float64(dy[r*c+j])
			}
		}
		biasGradKernel(db, dy)
		for j := range want {
			if math.Abs(float64(db[j])-want[j]) > 1e-5*(1+math.Abs(want[j]))*math.Sqrt(float64(n)) {
				t.Fatalf("%dx%d: dbias[%d] = %v, want %v", n, c, j, db[j], want[j])
			}
		}
	}
}

// TestLayerNormSIMDInPlace runs the AVX-512 LayerNorm with out = x and its backward with dx = dout (both allowed
// by the ops) on a row width with a tail, against the same calls into separate outputs.
func TestLayerNormSIMDInPlace(t *testing.T) {
	if !hasSIMD {
		t.Skip("no AVX-512 kernels on this processor")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	const n, c = 9, 37
	x, gamma, beta, dout := randf(rng, n*c), randf(rng, c), randf(rng, c), randf(rng, n*c)
	out, mean, rstd := make([]float32, n*c), make([]float32, n), make([]float32, n)
	layerNormKernel(out, mean, rstd, x, gamma, beta, 1e-5)
	in := append([]float32(nil), x...)
	layerNormKernel(in, make([]float32, n), make([]float32, n), in, gamma, beta, 1e-5)
	dx := make([]float32, n*c)
	layerNormBackwardKernel(dx, nil, nil, dout, x, gamma, mean, rstd)
	d := append([]float32(nil), dout...)
	layerNormBackwardKernel(d, nil, nil, d, x, gamma, mean, rstd)
	for i := range out {
		if in[i] != out[i] || d[i] != dx[i] {
			t.Fatalf("element %d: in place %v, %v; separate %v, %v", i, in[i], d[i], out[i], dx[i])
		}
	}
}

// TestAdamWSIMDMatchesScalar requires the AVX-512 AdamW to give exactly adamWLoop's bits (with and without
// decay, lengths with tails, zero and tiny second moments).
func TestAdamWSIMDMatchesScalar(t *testing.T) {
	if !hasSIMD {
		t.Skip("no AVX-512 kernels on this processor")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	h := newAdamWHyper(1e-3, 0.9, 0.999, 1e-8, 0.01, 7)
	for _, n := range []int{1, 15, 16, 17, 100} {
		for _, decay := range []bool{false, true} {
			p, g, m := randf(rng, n), randf(rng, n), randf(rng, n)
			v := randf(rng, n)
			for i := range v {
				v[i] *= v[i]
				if i%5 == 0 {
					v[i] = 0
				}
			}
			p2, g2, m2, v2 := append([]float32(nil), p...), append([]float32(nil), g...), append([]float32(nil), m...), append([]float32(nil), v...)
			adamWKernel(p, g, m, v, h, decay)
			adamWLoop(p2, g2, m2, v2, float32(h.decayFactor), float32(h.beta1), float32(h.beta2), float32(1-h.beta1),
				float32(1-h.beta2), float32(h.stepSize), float32(h.bc2Sqrt), float32(h.eps), decay)
			for i := range p {
				if math.Float32bits(p[i]) != math.Float32bits(p2[i]) || m[i] != m2[i] || v[i] != v2[i] {
					t.Fatalf("n %d decay %v element %d: p %v m %v v %v, scalar %v %v %v", n, decay, i, p[i], m[i], v[i], p2[i], m2[i], v2[i])
				}
			}
		}
	}
}

// TestAddAxpySIMDMatchScalar requires the AVX-512 Add and Axpy to give the scalar loops' bits, in place too.
func TestAddAxpySIMDMatchScalar(t *testing.T) {
	if !hasSIMD {
		t.Skip("no AVX-512 kernels on this processor")
	}
	for _, n := range []int{1, 15, 16, 17, 1000} {
		a, b := simdInputs(n, 3), simdInputs(n, 1)
		out := make([]float32, n)
		addKernel(out, a, b)
		y := append([]float32(nil), a...)
		axpyKernel(y, b, 0.3)
		inPlace := append([]float32(nil), a...)
		addKernel(inPlace, inPlace, b)
		for i := range a {
			sum, ax := a[i]+b[i], a[i]+0.3*b[i]
			if !sameBits(out[i], sum) || !sameBits(inPlace[i], sum) || !sameBits(y[i], ax) {
				t.Fatalf("n %d element %d: add %v (in place %v), axpy %v; scalar %v, %v", n, i, out[i], inPlace[i], y[i], sum, ax)
			}
		}
	}
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || isNaN32(a) && isNaN32(b)
}

// TestSmallPathsDeterministic requires the small GEMM path and the fast attention to give the same bits on 1
// and 4 cores (every element is summed by one task in a fixed order).
func TestSmallPathsDeterministic(t *testing.T) {
	if !hasSIMD {
		t.Skip("no AVX-512 kernels on this processor")
	}
	rng := rand.New(rand.NewPCG(13, 14))
	g := gemmGeom{M: 640, N: 64, K: 128, Batch: 1, TransB: true, LDA: 128, LDB: 128, LDC: 64}
	a, b, bias := randf(rng, 640*128), randf(rng, 64*128), randf(rng, 64)
	c := attnCase{B: 8, Hq: 4, Hkv: 4, Tq: 20, Tk: 20, D: 16, mask: true, p: 0.1}
	mask, _ := c.inputs(rand.New(rand.NewPCG(1, 1)))
	pr := &attnProblem[float32]{B: c.B, Hq: c.Hq, Hkv: c.Hkv, Tq: c.Tq, Tk: c.Tk, D: c.D, scale: 0.25, mask: mask, p: c.p, seed: 3}
	nq := c.B * c.Hq * c.Tq * c.D
	q, k, v, dout := randf(rng, nq), randf(rng, nq), randf(rng, nq), randf(rng, nq)
	run := func(procs int) [][]float32 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		out := make([]float32, 640*64)
		smallGemm(g, 1, a, b, 0, out, bias)
		dn := func(x []float32) attnView { return denseView(x, c.Hq, c.Tq, c.D) }
		o, lse := make([]float32, nq), make([]float32, c.B*c.Hq*c.Tq)
		dq, dk, dv := make([]float32, nq), make([]float32, nq), make([]float32, nq)
		attnForwardFast(pr, dn(o), lse, dn(q), dn(k), dn(v))
		attnBackwardFast(pr, dn(dq), dn(dk), dn(dv), dn(q), dn(k), dn(v), lse, dn(dout))
		return [][]float32{out, o, lse, dq, dk, dv}
	}
	one, many := run(1), run(4)
	for i := range one {
		for j := range one[i] {
			if math.Float32bits(one[i][j]) != math.Float32bits(many[i][j]) {
				t.Fatalf("output %d element %d: %v on 1 core, %v on 4", i, j, one[i][j], many[i][j])
			}
		}
	}
}
