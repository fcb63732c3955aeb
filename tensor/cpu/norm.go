package cpu

import (
	"math"

	"github.com/tune-ml/tune/tensor"
)

// layerNormKernel normalizes each row of x (N, C), N = len(mean), C = len(gamma):
//
//	μ = Σx/C,  σ² = Σ(x−μ)²/C (biased, two-pass),  rstd = 1/√(σ² + eps)
//	out = (x − μ)·rstd·gamma + beta
//
// as torch.nn.LayerNorm, and saves mean (N) and rstd (N) for the backward. out may be x.
func layerNormKernel[T scalar](out, mean, rstd, x, gamma, beta []T, eps T) {
	c := len(gamma)
	if o, ok := any(out).([]float32); ok && hasSIMD && len(mean) > 0 && c > 0 {
		layerNormF32(o, any(mean).([]float32), any(rstd).([]float32), any(x).([]float32), any(gamma).([]float32), any(beta).([]float32), float32(eps))
		return
	}
	for i := range mean {
		row, o := x[i*c:(i+1)*c], out[i*c:(i+1)*c]
		var sum T
		for _, v := range row {
			sum += v
		}
		m := sum / T(c)
		var ss T
		for _, v := range row {
			d := v - m
			ss += d * d
		}
		r := T(1 / math.Sqrt(float64(ss/T(c)+eps)))
		for j, v := range row {
			o[j] = (v-m)*r*gamma[j] + beta[j]
		}
		mean[i], rstd[i] = m, r
	}
}

// layerNormBackwardKernel computes, per row with n̂ = (x−μ)·rstd and g = dout·gamma (the derivative of
// layerNormKernel; the llm.c layernorm_backward form):
//
//	dx      =  rstd·(g − mean(g) − n̂·mean(g·n̂))
//	dgamma += dout·n̂      (skipped when dgamma is nil)
//	dbeta  += dout        (skipped when dbeta is nil)
//
// dx may be dout or x.
func layerNormBackwardKernel[T scalar](dx, dgamma, dbeta, dout, x, gamma, mean, rstd []T) {
	c := len(gamma)
	if d, ok := any(dx).([]float32); ok && hasSIMD && len(mean) > 0 && c > 0 {
		n := len(mean) * c
		d, do, xv := d[:n], any(dout).([]float32)[:n], any(x).([]float32)[:n]
		g, m, r := any(gamma).([]float32), any(mean).([]float32), any(rstd).([]float32)[:len(mean)]
		var pg, pb *float32
		if dgamma != nil {
			pg = &any(dgamma).([]float32)[:c][0]
		}
		if dbeta != nil {
			pb = &any(dbeta).([]float32)[:c][0]
		}
		layerNormBackAVX512(&d[0], pg, pb, &do[0], &xv[0], &g[0], &m[0], &r[0], len(mean), c)
		return
	}
	for i := range mean {
		xr, dr, dxr := x[i*c:(i+1)*c], dout[i*c:(i+1)*c], dx[i*c:(i+1)*c]
		m, r := mean[i], rstd[i]
		var sumG, sumGN T
		for j, v := range xr {
			g := dr[j] * gamma[j]
			sumG += g
			sumGN += g * (v - m) * r
		}
		meanG, meanGN := sumG/T(c), sumGN/T(c)
		for j, v := range xr {
			n := (v - m) * r
			if dgamma != nil {
				dgamma[j] += dr[j] * n
			}
			if dbeta != nil {
				dbeta[j] += dr[j]
			}
			dxr[j] = r * (dr[j]*gamma[j] - meanG - n*meanGN)
		}
	}
}

// layerNormF32 is layerNormKernel for float32 with the AVX-512 row kernels: the same per-element operations in
// the same order, the row sums formed in 16 lanes (simd_amd64.s), rstd computed as the reference does.
func layerNormF32(out, mean, rstd, x, gamma, beta []float32, eps float32) {
	rows, c := len(mean), len(gamma)
	n := rows * c
	out, x, rstd, beta = out[:n], x[:n], rstd[:rows], beta[:c]
	layerNormStatsAVX512(&x[0], rows, c, &mean[0], &rstd[0]) // rstd holds Σ(x − μ)² for now
	for i, ss := range rstd {
		rstd[i] = float32(1 / math.Sqrt(float64(ss/float32(c)+eps)))
	}
	layerNormApplyAVX512(&out[0], &x[0], rows, c, &mean[0], &rstd[0], &gamma[0], &beta[0])
}

// LayerNorm normalizes the last axis: x (N, C) → out (N, C) = (x − μ)·rstd·gamma + beta with the biased
// variance and rstd = 1/√(var + eps) (torch.nn.LayerNorm); mean (N) and rstd (N) are F32 and overwritten for
// the backward. gamma and beta hold C elements. out may be x. eps must be ≥ 0 (ErrArgument).
func (b *Backend) LayerNorm(out, mean, rstd, x, gamma, beta *tensor.Tensor, eps float32) (err error) {
	const op = "LayerNorm"
	defer guard(&err, op, out, mean, rstd, x, gamma, beta)
	c := newCheck(op, out, mean, rstd, x, gamma, beta).float("out", out).f32("mean", mean).f32("rstd", rstd).
		float("x", x).float("gamma", gamma).float("beta", beta)
	n, ch := c.rows("x", x)
	c.numel("out", out, n*ch).numel("mean", mean, n).numel("rstd", rstd, n).numel("gamma", gamma, ch).
		numel("beta", beta, ch).that(eps >= 0, tensor.ErrArgument, "eps = %v, want ≥ 0", eps)
	if c.Err() != nil || ch == 0 {
		return c.Err()
	}
	xv, gv, bv := load(x), load(gamma), load(beta)
	o, mv, rv := overwrite(out), f32Of(mean), f32Of(rstd)
	parallelFor(n, 8*ch, func(lo, hi int) {
		layerNormKernel(o.V[lo*ch:hi*ch], mv[lo:hi], rv[lo:hi], xv[lo*ch:hi*ch], gv, bv, eps)
	})
	o.Store()
	return nil
}

// LayerNormBackward computes dx (N, C) =, dgamma (C) += and dbeta (C) += from dout (N, C) and the forward's
// x, gamma, mean (F32, N) and rstd (F32, N). dgamma and dbeta may be nil for a frozen LayerNorm. Weight
// gradients are summed per fixed row chunk, then over chunks in order (reproducible on any core count).
func (b *Backend) LayerNormBackward(dx, dgamma, dbeta, dout, x, gamma, mean, rstd *tensor.Tensor) (err error) {
	const op = "LayerNormBackward"
	defer guard(&err, op, dx, dgamma, dbeta, dout, x, gamma, mean, rstd)
	c := newCheck(op, dx, dgamma, dbeta, dout, x, gamma, mean, rstd).float("dx", dx).float("dout", dout).
		float("x", x).float("gamma", gamma).f32("mean", mean).f32("rstd", rstd)
	n, ch := c.rows("x", x)
	c.numel("dx", dx, n*ch).numel("dout", dout, n*ch).numel("gamma", gamma, ch).numel("mean", mean, n).
		numel("rstd", rstd, n)
	if dgamma != nil {
		c.float("dgamma", dgamma).numel("dgamma", dgamma, ch)
	}
	if dbeta != nil {
		c.float("dbeta", dbeta).numel("dbeta", dbeta, ch)
	}
	if c.Err() != nil || ch == 0 {
		return c.Err()
	}
	xv, dv, gv, mv, rv := load(x), load(dout), load(gamma), f32Of(mean), f32Of(rstd)
	o := overwrite(dx)
	_, chunks := chunking(n, 10*ch)
	var pg, pb []float32 // per-chunk partial weight gradients (chunks, C), zeroed scratch from the pool
	var sc scratch
	defer sc.release()
	if dgamma != nil {
		pg = sc.get(chunks * ch)
		clear(pg)
	}
	if dbeta != nil {
		pb = sc.get(chunks * ch)
		clear(pb)
	}
	parallelChunks(n, 10*ch, func(k, lo, hi int) {
		var g, bb []float32
		if pg != nil {
			g = pg[k*ch : (k+1)*ch]
		}
		if pb != nil {
			bb = pb[k*ch : (k+1)*ch]
		}
		layerNormBackwardKernel(o.V[lo*ch:hi*ch], g, bb, dv[lo*ch:hi*ch], xv[lo*ch:hi*ch], gv, mv[lo:hi], rv[lo:hi])
	})
	o.Store()
	for _, acc := range []struct {
		t       *tensor.Tensor
		partial []float32
	}{{dgamma, pg}, {dbeta, pb}} {
		if acc.t == nil {
			continue
		}
		w := accumulate(acc.t)
		for k := 0; k < chunks; k++ {
			axpyKernel(w.V, acc.partial[k*ch:(k+1)*ch], 1)
		}
		w.Store()
	}
	return nil
}
