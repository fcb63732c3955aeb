package amp

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// mlp is a 2-layer perceptron built directly from Backend ops, for the mixed-precision tests:
//
//	hpre = x·W1ᵀ + b1     (N, H)   Gemm, LowerPrecision
//	h    = GELU(hpre)     (N, H)   Passthrough: keeps hpre's dtype
//	y    = h·W2ᵀ + b2     (N, O)   Gemm, LowerPrecision
//	loss = λ·mean((y − t)²)        MSELoss, FP32Class
//
// Parameters and gradients are named views of one flat F32 buffer each (master weights, FP32 gradients), so the
// optimizer is one op and zero-grad one Fill. Under autocast W1 and W2 are cast once per step by a WeightCache.
type mlp struct {
	b              tensor.Backend
	in, hid, out   int
	params, grads  *tensor.Tensor // (P) F32
	w1, b1, w2, b2 *tensor.Tensor // views of params: (H, In), (H), (O, H), (O)
	dw1, db1       *tensor.Tensor // views of grads, accumulated (+=)
	dw2, db2       *tensor.Tensor
}

// newMLP returns an MLP with weights drawn from U(−1/√fan_in, 1/√fan_in) (nn.Linear's init) by seed.
func newMLP(t *testing.T, b tensor.Backend, in, hid, out int, seed uint64) *mlp {
	t.Helper()
	n := hid*in + hid + out*hid + out
	m := &mlp{b: b, in: in, hid: hid, out: out,
		params: tensortest.Alloc(t, b, tensor.F32, n), grads: tensortest.Alloc(t, b, tensor.F32, n)}
	carve := func(flat *tensor.Tensor) []*tensor.Tensor {
		off := 0
		var vs []*tensor.Tensor
		for _, shape := range [][]int{{hid, in}, {hid}, {out, hid}, {out}} {
			v, err := flat.View(off, shape...)
			must(t, err)
			off += v.Numel()
			vs = append(vs, v)
		}
		return vs
	}
	p, g := carve(m.params), carve(m.grads)
	m.w1, m.b1, m.w2, m.b2 = p[0], p[1], p[2], p[3]
	m.dw1, m.db1, m.dw2, m.db2 = g[0], g[1], g[2], g[3]
	r := rand.New(rand.NewPCG(seed, 1))
	host := make([]float32, n)
	bound := func(fanIn int) float32 { return float32(1 / math.Sqrt(float64(fanIn))) }
	for i := range host {
		fan := in
		if i >= hid*in+hid {
			fan = hid
		}
		host[i] = (2*r.Float32() - 1) * bound(fan)
	}
	must(t, b.Upload(m.params, host))
	return m
}

// mlpStep holds one micro-batch's activations and their gradients (for inspection by the tests).
type mlpStep struct {
	hpre, h, y     *tensor.Tensor // (N, H), (N, H), (N, O) in the policy's dtypes
	dy, dh, dhpre  *tensor.Tensor // gradients of y, h, hpre: same dtypes as the activations
	loss           float64        // λ·mean((y−t)²), FP32-computed, never scaled
	lossesPerEntry []float32
}

// forwardBackward runs one micro-batch under policy p: x (N, In) F32, target (N, O) F32. The backward is seeded
// with seed·λ/(N·O) (seed is the GradScaler's scale, further divided by the accumulation count if any), and the
// weight gradients are accumulated into m.grads. cache is nil under FP32.
func (m *mlp) forwardBackward(t *testing.T, p Policy, cache *WeightCache, x, target *tensor.Tensor, lambda, seed float32) mlpStep {
	t.Helper()
	b := m.b
	n := x.Shape[0]
	gemm := p.GemmDType()
	w1, w2 := m.w1, m.w2
	xin := x
	if p.Enabled {
		var err error
		w1, err = cache.Get(m.w1)
		must(t, err)
		w2, err = cache.Get(m.w2)
		must(t, err)
		xin = tensortest.Alloc(t, b, gemm, n, m.in) // linear casts its activation input too
		must(t, b.Cast(xin, x))
	}
	hdt := p.OutputDType(LowerPrecision, tensor.F32, tensor.F32)
	var s mlpStep
	s.hpre = tensortest.Alloc(t, b, hdt, n, m.hid)
	must(t, b.Gemm(tensor.GemmArgs{TransB: true, M: n, N: m.hid, K: m.in, A: xin, B: w1, C: s.hpre, Alpha: 1, Bias: m.b1}))
	gc, _ := ClassOf("GELU")
	s.h = tensortest.Alloc(t, b, p.OutputDType(gc, hdt), n, m.hid)
	must(t, b.GELU(s.h, s.hpre))
	s.y = tensortest.Alloc(t, b, hdt, n, m.out)
	must(t, b.Gemm(tensor.GemmArgs{TransB: true, M: n, N: m.out, K: m.hid, A: s.h, B: w2, C: s.y, Alpha: 1, Bias: m.b2}))

	lc, _ := ClassOf("MSELoss")
	losses := tensortest.Alloc(t, b, p.OutputDType(lc, s.y.DType, target.DType), n*m.out)
	yFlat, err := s.y.Reshape(n * m.out)
	must(t, err)
	tFlat, err := target.Reshape(n * m.out)
	must(t, err)
	must(t, b.MSELoss(losses, yFlat, tFlat))
	s.lossesPerEntry = tensortest.Download(t, b, losses)
	var sum float64
	for _, l := range s.lossesPerEntry {
		sum += float64(l)
	}
	s.loss = float64(lambda) * sum / float64(n*m.out)

	// backward, the forward reversed; activation gradients have their activation's dtype
	s.dy = tensortest.Alloc(t, b, s.y.DType, n, m.out)
	dyFlat, err := s.dy.Reshape(n * m.out)
	must(t, err)
	must(t, b.MSELossBackward(dyFlat, yFlat, tFlat, seed*lambda/float32(n*m.out), nil))
	must(t, b.Gemm(tensor.GemmArgs{TransA: true, M: m.out, N: m.hid, K: n, A: s.dy, B: s.h, C: m.dw2, Alpha: 1, Beta: 1}))
	must(t, b.BiasGrad(m.db2, s.dy))
	s.dh = tensortest.Alloc(t, b, s.h.DType, n, m.hid)
	must(t, b.Gemm(tensor.GemmArgs{M: n, N: m.hid, K: m.out, A: s.dy, B: w2, C: s.dh, Alpha: 1}))
	s.dhpre = tensortest.Alloc(t, b, s.hpre.DType, n, m.hid)
	must(t, b.GELUBackward(s.dhpre, s.dh, s.hpre))
	must(t, b.Gemm(tensor.GemmArgs{TransA: true, M: m.hid, N: m.in, K: n, A: s.dhpre, B: xin, C: m.dw1, Alpha: 1, Beta: 1}))
	must(t, b.BiasGrad(m.db1, s.dhpre))
	return s
}

// gradList returns the four gradient views (what a trainer hands to Unscale and ClipGradNorm).
func (m *mlp) gradList() []*tensor.Tensor { return []*tensor.Tensor{m.dw1, m.db1, m.dw2, m.db2} }

// randData returns x (N, In) ~ U(−1, 1) and a target (N, O) ~ U(−1, 1), F32, drawn from seed.
func randData(t *testing.T, b tensor.Backend, n, in, out int, seed uint64) (x, target *tensor.Tensor) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 2))
	u := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = 2*r.Float32() - 1
		}
		return v
	}
	return tensortest.Upload(t, b, tensor.F32, u(n*in), n, in), tensortest.Upload(t, b, tensor.F32, u(n*out), n, out)
}

// zeroFraction returns the fraction of elements of got that are exactly zero where ref is not.
func zeroFraction(got, ref []float32) float64 {
	lost, nonzero := 0, 0
	for i, r := range ref {
		if r != 0 {
			nonzero++
			if got[i] == 0 {
				lost++
			}
		}
	}
	if nonzero == 0 {
		return 0
	}
	return float64(lost) / float64(nonzero)
}

// relErr returns ‖a − ref‖₂ / ‖ref‖₂.
func relErr(a, ref []float32) float64 {
	var d, n float64
	for i := range ref {
		e := float64(a[i]) - float64(ref[i])
		d += e * e
		n += float64(ref[i]) * float64(ref[i])
	}
	return math.Sqrt(d / n)
}
