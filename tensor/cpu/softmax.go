package cpu

import (
	"math"

	"github.com/tune-ml/tune/tensor"
)

// softmaxKernel computes, for each row i of x (C = c columns),
//
//	out = exp(z − max z) / Σ exp(z − max z),   z = x + mask[(first+i)/rowsPerMask]
//
// with mask (B, C) or nil, first the global index of x's first row. A row whose every z is −Inf gives zeros
// (a fully masked row); a NaN or +Inf anywhere in z gives a NaN row. out may be x.
func softmaxKernel[T scalar](out, x, mask []T, c, rowsPerMask, first int) {
	for i := 0; (i+1)*c <= len(x) && c > 0; i++ {
		xr, o := x[i*c:(i+1)*c], out[i*c:(i+1)*c]
		var mr []T
		if mask != nil {
			bi := (first + i) / rowsPerMask
			mr = mask[bi*c : (bi+1)*c]
		}
		mx := T(math.Inf(-1))
		for j, v := range xr {
			if mr != nil {
				v += mr[j]
			}
			mx = max(mx, v)
		}
		if math.IsInf(float64(mx), -1) {
			clear(o)
			continue
		}
		var sum T
		for j, v := range xr {
			if mr != nil {
				v += mr[j]
			}
			e := T(math.Exp(float64(v - mx)))
			o[j] = e
			sum += e
		}
		inv := 1 / sum
		for j := range o {
			o[j] *= inv
		}
	}
}

// softmaxBackwardKernel: dx = y·(dout − Σ_c dout·y) per row of c columns, y the forward output. dx may be
// dout.
func softmaxBackwardKernel[T scalar](dx, dout, y []T, c int) {
	for i := 0; (i+1)*c <= len(y) && c > 0; i++ {
		yr, dr, dxr := y[i*c:(i+1)*c], dout[i*c:(i+1)*c], dx[i*c:(i+1)*c]
		var dot T
		for j, v := range yr {
			dot += dr[j] * v
		}
		for j, v := range yr {
			dxr[j] = v * (dr[j] - dot)
		}
	}
}

// Softmax normalizes the last axis with an additive mask: x (…, C) is viewed as (B, R, C) rows where
// B = mask's row count, and out = softmax(x + mask[b]) per row. mask (B, C) is F32 or nil (then B = 1); the
// row count of x must be a multiple of B. Masks may use −Inf or a large negative value (−1e4,
// torch.finfo(float32).min); a row whose every entry is −Inf gives zeros. out may be x.
func (b *Backend) Softmax(out, x, mask *tensor.Tensor) (err error) {
	defer guard(&err, "Softmax", out, x, mask)
	c := newCheck("Softmax", out, x, mask).float("out", out).float("x", x)
	n, ch := c.rows("x", x)
	c.numel("out", out, n*ch)
	rowsPerMask := max(n, 1)
	if mask != nil {
		c.f32("mask", mask)
		mb, mc := c.rows("mask", mask)
		c.that(mc == ch, tensor.ErrShape, "mask rows have %d columns, x rows have %d", mc, ch)
		c.that(mb > 0 && n%mb == 0, tensor.ErrShape, "x has %d rows, not a multiple of mask's %d", n, mb)
		if c.Err() == nil && ch > 0 {
			rowsPerMask = n / mb
		}
	}
	if c.Err() != nil || ch == 0 {
		return c.Err()
	}
	xv := load(x)
	var mv []float32
	if mask != nil {
		mv = f32Of(mask)
	}
	o := overwrite(out)
	parallelFor(n, 24*ch, func(lo, hi int) {
		softmaxKernel(o.V[lo*ch:hi*ch], xv[lo*ch:hi*ch], mv, ch, rowsPerMask, lo)
	})
	o.Store()
	return nil
}

// SoftmaxBackward sets dx = y·(dout − Σ_c dout·y) per row of the last axis, y the forward output (all three
// the same element count). dx may be dout.
func (b *Backend) SoftmaxBackward(dx, dout, y *tensor.Tensor) (err error) {
	defer guard(&err, "SoftmaxBackward", dx, dout, y)
	c := newCheck("SoftmaxBackward", dx, dout, y).float("dx", dx).float("dout", dout).float("y", y)
	n, ch := c.rows("y", y)
	c.numel("dx", dx, n*ch).numel("dout", dout, n*ch)
	if c.Err() != nil || ch == 0 {
		return c.Err()
	}
	dv, yv := load(dout), load(y)
	o := overwrite(dx)
	parallelFor(n, 4*ch, func(lo, hi int) {
		softmaxBackwardKernel(o.V[lo*ch:hi*ch], dv[lo*ch:hi*ch], yv[lo*ch:hi*ch], ch)
	})
	o.Store()
	return nil
}
