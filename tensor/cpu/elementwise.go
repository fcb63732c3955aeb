package cpu

import "github.com/tune-ml/tune/tensor"

// scalar is the element type of the numeric kernels: float32 in the backend, float64 in the gradient checks.
type scalar interface{ float32 | float64 }

// scaleKernel: x = alpha·x.
func scaleKernel[T scalar](x []T, alpha T) {
	for i := range x {
		x[i] *= alpha
	}
}

// addKernel: out = a + b (F32 with AVX-512: 16 at a time, the same bits).
func addKernel[T scalar](out, a, b []T) {
	if o, ok := any(out).([]float32); ok && hasSIMD && len(o) > 0 {
		n := len(o)
		a32, b32 := any(a).([]float32)[:n], any(b).([]float32)[:n]
		addAVX512(&o[0], &a32[0], &b32[0], n)
		return
	}
	for i := range out {
		out[i] = a[i] + b[i]
	}
}

// axpyKernel: y += alpha·x (F32 with AVX-512: 16 at a time, the same bits).
func axpyKernel[T scalar](y, x []T, alpha T) {
	if y32, ok := any(y).([]float32); ok && hasSIMD && len(y32) > 0 {
		n := len(y32)
		x32 := any(x).([]float32)[:n]
		axpyAVX512(&y32[0], &x32[0], n, float32(alpha))
		return
	}
	for i := range y {
		y[i] += alpha * x[i]
	}
}

// Scale sets x = alpha·x in place (any float dtype; computed in FP32, rounded once).
func (b *Backend) Scale(x *tensor.Tensor, alpha float32) (err error) {
	defer guard(&err, "Scale", x)
	if err := newCheck("Scale", x).float("x", x).Err(); err != nil {
		return err
	}
	o := accumulate(x)
	scaleKernel(o.V, alpha)
	o.Store()
	return nil
}

// Add sets out = a + b elementwise (the residual add). The three tensors hold the same number of elements;
// out may be a or b.
func (b *Backend) Add(out, a, bt *tensor.Tensor) (err error) {
	defer guard(&err, "Add", out, a, bt)
	c := newCheck("Add", out, a, bt).float("out", out).float("a", a).float("b", bt)
	if c.Err() != nil {
		return c.Err()
	}
	if err := c.numel("a", a, out.Numel()).numel("b", bt, out.Numel()).Err(); err != nil {
		return err
	}
	av, bv := load(a), load(bt)
	o := overwrite(out)
	addKernel(o.V, av, bv)
	o.Store()
	return nil
}

// Axpy sets y += alpha·x elementwise (equal element counts), the accumulation of gradient branches.
func (b *Backend) Axpy(y, x *tensor.Tensor, alpha float32) (err error) {
	defer guard(&err, "Axpy", y, x)
	c := newCheck("Axpy", y, x).float("y", y).float("x", x)
	if c.Err() != nil {
		return c.Err()
	}
	if err := c.numel("x", x, y.Numel()).Err(); err != nil {
		return err
	}
	xv := load(x)
	o := accumulate(y)
	axpyKernel(o.V, xv, alpha)
	o.Store()
	return nil
}
