package cpu

import (
	"math"

	"github.com/tune-ml/tune/tensor"
)

// rmsNormKernel normalizes each row of x (N, C), N = len(rstd), C = len(w), as transformers' LlamaRMSNorm
// (models/llama/modeling_llama.py):
//
//	variance = mean(x²)                  in FP32 (hidden_states.to(torch.float32).pow(2).mean(-1))
//	rstd     = 1/√(variance + eps)       (torch.rsqrt)
//	out      = w · rx(x·rstd)            (self.weight * hidden_states.to(input_dtype))
//
// rx rounds to x's storage dtype (the identity for F32 and in the float64 gradient checks); the product is
// rounded to out's dtype by the caller's store. rstd is evaluated in float64 and rounded once. out may be x.
func rmsNormKernel[T scalar](out, rstd, x, w []T, eps T, rx func(T) T) {
	c := len(w)
	for i := range rstd {
		row, o := x[i*c:(i+1)*c], out[i*c:(i+1)*c]
		var ss T
		for _, v := range row {
			ss += v * v
		}
		r := T(1 / math.Sqrt(float64(ss/T(c)+eps)))
		for j, v := range row {
			o[j] = w[j] * rx(v*r)
		}
		rstd[i] = r
	}
}

// rmsNormBackwardKernel is the derivative of rmsNormKernel per row, with n̂ = x·rstd and g = rx(dout·w) (the
// gradient PyTorch's autograd hands to the .to(input_dtype) cast, in x's dtype):
//
//	dx  = rstd·(g − n̂·mean(g·n̂))
//	dw += dout·rx(n̂)            (skipped when dw is nil)
//
// dx may be dout or x.
func rmsNormBackwardKernel[T scalar](dx, dw, dout, x, w, rstd []T, rx func(T) T) {
	c := len(w)
	for i, r := range rstd {
		xr, dr, dxr := x[i*c:(i+1)*c], dout[i*c:(i+1)*c], dx[i*c:(i+1)*c]
		var sum T
		for j, v := range xr {
			sum += rx(dr[j]*w[j]) * (v * r)
		}
		m := sum / T(c)
		for j, v := range xr {
			n := v * r
			if dw != nil {
				dw[j] += dr[j] * rx(n)
			}
			dxr[j] = r * (rx(dr[j]*w[j]) - n*m)
		}
	}
}

// rounder returns the function that rounds an FP32 value to dt (the identity for F32).
func rounder(dt tensor.DType) func(float32) float32 {
	if dt == tensor.F32 {
		return func(v float32) float32 { return v }
	}
	return func(v float32) float32 { return tensor.RoundTo(dt, v) }
}

// RMSNorm normalizes the last axis: x (N, C) → out (N, C) = weight·round_x(x·rstd) with rstd (N, F32) =
// 1/√(mean(x²) + eps) overwritten for the backward (transformers' LlamaRMSNorm; see rmsNormKernel). weight
// holds C elements. out may be x. eps must be ≥ 0 (ErrArgument).
func (b *Backend) RMSNorm(out, rstd, x, weight *tensor.Tensor, eps float32) (err error) {
	const op = "RMSNorm"
	defer guard(&err, op, out, rstd, x, weight)
	c := newCheck(op, out, rstd, x, weight).float("out", out).f32("rstd", rstd).float("x", x).float("weight", weight)
	n, ch := c.rows("x", x)
	c.numel("out", out, n*ch).numel("rstd", rstd, n).numel("weight", weight, ch).
		that(eps >= 0, tensor.ErrArgument, "eps = %v, want ≥ 0", eps)
	if c.Err() != nil || ch == 0 {
		return c.Err()
	}
	xv, wv, rx := load(x), load(weight), rounder(x.DType)
	o, rv := overwrite(out), f32Of(rstd)
	parallelFor(n, 4*ch, func(lo, hi int) {
		rmsNormKernel(o.V[lo*ch:hi*ch], rv[lo:hi], xv[lo*ch:hi*ch], wv, eps, rx)
	})
	o.Store()
	return nil
}

// RMSNormBackward computes dx (N, C) = and dweight (C) += from dout (N, C) and the forward's x, weight and
// rstd (F32, N); dweight may be nil for a frozen weight. The weight gradient is summed per fixed row chunk,
// then over chunks in order (reproducible on any core count).
func (b *Backend) RMSNormBackward(dx, dweight, dout, x, weight, rstd *tensor.Tensor) (err error) {
	const op = "RMSNormBackward"
	defer guard(&err, op, dx, dweight, dout, x, weight, rstd)
	c := newCheck(op, dx, dweight, dout, x, weight, rstd).float("dx", dx).float("dout", dout).float("x", x).
		float("weight", weight).f32("rstd", rstd)
	n, ch := c.rows("x", x)
	c.numel("dx", dx, n*ch).numel("dout", dout, n*ch).numel("weight", weight, ch).numel("rstd", rstd, n)
	if dweight != nil {
		c.float("dweight", dweight).numel("dweight", dweight, ch)
	}
	if c.Err() != nil || ch == 0 {
		return c.Err()
	}
	xv, dv, wv, rv, rx := load(x), load(dout), load(weight), f32Of(rstd), rounder(x.DType)
	o := overwrite(dx)
	_, chunks := chunking(n, 8*ch)
	var pw []float32 // per-chunk partial weight gradients (chunks, C)
	if dweight != nil {
		pw = make([]float32, chunks*ch)
	}
	parallelChunks(n, 8*ch, func(k, lo, hi int) {
		var w []float32
		if pw != nil {
			w = pw[k*ch : (k+1)*ch]
		}
		rmsNormBackwardKernel(o.V[lo*ch:hi*ch], w, dv[lo*ch:hi*ch], xv[lo*ch:hi*ch], wv, rv[lo:hi], rx)
	})
	o.Store()
	if dweight != nil {
		w := accumulate(dweight)
		for k := 0; k < chunks; k++ {
			axpyKernel(w.V, pw[k*ch:(k+1)*ch], 1)
		}
		w.Store()
	}
	return nil
}
