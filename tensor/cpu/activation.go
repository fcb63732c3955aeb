package cpu

import (
	"math"

	"github.com/tune-ml/tune/tensor"
)

// geluKernel: out = x·Φ(x) = 0.5·x·(1 + erf(x/√2)), the exact GELU (Hendrycks & Gimpel 2016; PyTorch
// gelu with approximate='none'). Evaluated in float64 and rounded to T; for float32, Φ comes from the
// interpolated table of gelu_table.go (error ≤ 2e-10, below FP32's rounding).
func geluKernel[T scalar](out, x []T) {
	if o, ok := any(out).([]float32); ok {
		geluF32(o, any(x).([]float32))
		return
	}
	for i, v := range x {
		f := float64(v)
		out[i] = T(0.5 * f * (1 + math.Erf(f/math.Sqrt2)))
	}
}

// invSqrt2Pi is 1/√(2π), the standard normal density at 0.
const invSqrt2Pi = 0.3989422804014327

// geluBackwardKernel: dx = dout·(Φ(x) + x·φ(x)), φ(x) = exp(−x²/2)/√(2π), the derivative of x·Φ(x).
func geluBackwardKernel[T scalar](dx, dout, x []T) {
	if d, ok := any(dx).([]float32); ok {
		geluBackwardF32(d, any(dout).([]float32), any(x).([]float32))
		return
	}
	for i, v := range x {
		f := float64(v)
		cdf := 0.5 * (1 + math.Erf(f/math.Sqrt2))
		pdf := invSqrt2Pi * math.Exp(-0.5*f*f)
		dx[i] = dout[i] * T(cdf+f*pdf)
	}
}

// geluTanhC is √(2/π) and geluTanhK the cubic coefficient of the tanh approximation of GELU.
const (
	geluTanhC = 0.7978845608028654
	geluTanhK = 0.044715
)

// geluTanhKernel: out = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), the tanh approximation (Hendrycks &
// Gimpel 2016; PyTorch gelu with approximate='tanh', transformers' gelu_pytorch_tanh; gelu_new, GPT-2's
// activation, is the same formula written out in tensor ops). Evaluated in float64 and rounded to T.
func geluTanhKernel[T scalar](out, x []T) {
	for i, v := range x {
		f := float64(v)
		out[i] = T(0.5 * f * (1 + math.Tanh(geluTanhC*(f+geluTanhK*f*f*f))))
	}
}

// geluTanhBackwardKernel: dx = dout·(0.5·(1 + th) + 0.5·x·(1 − th²)·√(2/π)·(1 + 3·0.044715·x²)),
// th = tanh(√(2/π)·(x + 0.044715·x³)), the derivative PyTorch's GeluBackward computes for approximate='tanh'
// (aten/src/ATen/native/cpu/Activation.cpp).
func geluTanhBackwardKernel[T scalar](dx, dout, x []T) {
	for i, v := range x {
		f := float64(v)
		th := math.Tanh(geluTanhC * (f + geluTanhK*f*f*f))
		d := 0.5*(1+th) + 0.5*f*(1-th*th)*geluTanhC*(1+3*geluTanhK*f*f)
		dx[i] = dout[i] * T(d)
	}
}

// tanhKernel: out = tanh(x).
func tanhKernel[T scalar](out, x []T) {
	for i, v := range x {
		out[i] = T(math.Tanh(float64(v)))
	}
}

// tanhBackwardKernel: dx = dout·(1 − y²), y = tanh(x) the forward output.
func tanhBackwardKernel[T scalar](dx, dout, y []T) {
	for i, v := range y {
		dx[i] = dout[i] * (1 - v*v)
	}
}

// GELU sets out = x·Φ(x), the exact erf form (PyTorch gelu, approximate='none'), for equal element counts.
func (b *Backend) GELU(out, x *tensor.Tensor) error {
	return unaryOp("GELU", out, x, 40, geluKernel[float32])
}

// GELUBackward sets dx = dout·(Φ(x) + x·φ(x)) from the forward input x.
func (b *Backend) GELUBackward(dx, dout, x *tensor.Tensor) error {
	return binaryOp("GELUBackward", dx, dout, x, "x", 60, geluBackwardKernel[float32])
}

// GELUBackwardRecompute sets dx = dout·(Φ(x) + x·φ(x)) and, when out is non-nil, out = GELU(x): the values
// of GELUBackward and GELU, computed from one read of x (dx may be dout; out must not overlap the others);
// then, when dbias is non-nil, BiasGrad(dbias, dx).
func (b *Backend) GELUBackwardRecompute(dx, out, dbias, dout, x *tensor.Tensor) (err error) {
	defer guard(&err, "GELUBackwardRecompute", dx, out, dbias, dout, x)
	c := newCheck("GELUBackwardRecompute", dx, out, dbias, dout, x).float("dx", dx).float("dout", dout).float("x", x)
	if out != nil {
		c.float("out", out)
	}
	if dbias != nil {
		_, ch := c.float("dbias", dbias).rows("dx", dx)
		c.numel("dbias", dbias, ch)
	}
	if c.Err() != nil {
		return c.Err()
	}
	n := dx.Numel()
	c.numel("dout", dout, n).numel("x", x, n)
	if out != nil {
		c.numel("out", out, n)
	}
	if err := c.Err(); err != nil {
		return err
	}
	dv, xv := load(dout), load(x)
	d := overwrite(dx)
	if out == nil {
		parallelFor(n, 60, func(lo, hi int) { geluBackwardKernel(d.V[lo:hi], dv[lo:hi], xv[lo:hi]) })
		d.Store()
		return b.geluBiasGrad(dbias, dx)
	}
	o := overwrite(out)
	parallelFor(n, 100, func(lo, hi int) {
		geluBackwardKernel(d.V[lo:hi], dv[lo:hi], xv[lo:hi])
		geluKernel(o.V[lo:hi], xv[lo:hi])
	})
	d.Store()
	o.Store()
	return b.geluBiasGrad(dbias, dx)
}

// geluBiasGrad is GELUBackwardRecompute's optional BiasGrad(dbias, dx).
func (b *Backend) geluBiasGrad(dbias, dx *tensor.Tensor) error {
	if dbias == nil {
		return nil
	}
	return b.BiasGrad(dbias, dx)
}

// GELUTanh sets out = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), GPT-2's tanh-approximate GELU.
func (b *Backend) GELUTanh(out, x *tensor.Tensor) error {
	return unaryOp("GELUTanh", out, x, 40, geluTanhKernel[float32])
}

// GELUTanhBackward sets dx = dout·GELUTanh'(x) from the forward input x.
func (b *Backend) GELUTanhBackward(dx, dout, x *tensor.Tensor) error {
	return binaryOp("GELUTanhBackward", dx, dout, x, "x", 60, geluTanhBackwardKernel[float32])
}

// Tanh sets out = tanh(x) (the BERT pooler activation).
func (b *Backend) Tanh(out, x *tensor.Tensor) error {
	return unaryOp("Tanh", out, x, 20, tanhKernel[float32])
}

// TanhBackward sets dx = dout·(1 − y²) from the forward output y = tanh(x).
func (b *Backend) TanhBackward(dx, dout, y *tensor.Tensor) error {
	return binaryOp("TanhBackward", dx, dout, y, "y", 2, tanhBackwardKernel[float32])
}

// unaryOp validates out = f(x) over equal element counts and runs kernel on parallel chunks of cost units
// per element.
func unaryOp(op string, out, x *tensor.Tensor, cost int, kernel func(out, x []float32)) (err error) {
	defer guard(&err, op, out, x)
	c := newCheck(op, out, x).float("out", out).float("x", x)
	if c.Err() != nil {
		return c.Err()
	}
	if err := c.numel("x", x, out.Numel()).Err(); err != nil {
		return err
	}
	xv := load(x)
	o := overwrite(out)
	parallelFor(len(xv), cost, func(lo, hi int) { kernel(o.V[lo:hi], xv[lo:hi]) })
	o.Store()
	return nil
}

// binaryOp validates dx = f(dout, s) over equal element counts (s the saved forward tensor, named sname in
// errors) and runs kernel on parallel chunks.
func binaryOp(op string, dx, dout, s *tensor.Tensor, sname string, cost int, kernel func(dx, dout, s []float32)) (err error) {
	defer guard(&err, op, dx, dout, s)
	c := newCheck(op, dx, dout, s).float("dx", dx).float("dout", dout).float(sname, s)
	if c.Err() != nil {
		return c.Err()
	}
	if err := c.numel("dout", dout, dx.Numel()).numel(sname, s, dx.Numel()).Err(); err != nil {
		return err
	}
	dv, sv := load(dout), load(s)
	o := overwrite(dx)
	parallelFor(len(sv), cost, func(lo, hi int) { kernel(o.V[lo:hi], dv[lo:hi], sv[lo:hi]) })
	o.Store()
	return nil
}
