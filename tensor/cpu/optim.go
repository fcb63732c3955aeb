package cpu

import (
	"math"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// adamWHyper holds one step's scalars, computed in float64 from the float32 arguments as PyTorch computes its
// Python-float scalars, then used in T (as PyTorch casts a scalar to the tensor's type).
type adamWHyper struct {
	decayFactor  float64 // 1 − lr·wd
	beta1, beta2 float64
	stepSize     float64 // lr / (1 − β1^t)
	bc2Sqrt      float64 // √(1 − β2^t)
	eps          float64
}

func newAdamWHyper(lr, beta1, beta2, eps, wd float64, step int) adamWHyper {
	return adamWHyper{
		decayFactor: 1 - lr*wd,
		beta1:       beta1,
		beta2:       beta2,
		stepSize:    lr / (1 - math.Pow(beta1, float64(step))),
		bc2Sqrt:     math.Sqrt(1 - math.Pow(beta2, float64(step))),
		eps:         eps,
	}
}

// adamWKernel applies one AdamW step (torch.optim.AdamW, _single_tensor_adam, decoupled weight decay) to
// aligned slices, with t the 1-based step:
//
//	p  = p·(1 − lr·wd)                                  (only if decay)
//	m  = β1·m + (1−β1)·g
//	v  = β2·v + (1−β2)·g²
//	p  = p − (lr/(1−β1^t))·m / (√v/√(1−β2^t) + eps)
func adamWKernel[T scalar](p, g, m, v []T, h adamWHyper, decay bool) {
	df, b1, b2 := T(h.decayFactor), T(h.beta1), T(h.beta2)
	ob1, ob2 := T(1-h.beta1), T(1-h.beta2)
	step, bc2, eps := T(h.stepSize), T(h.bc2Sqrt), T(h.eps)
	if p32, ok := any(p).([]float32); ok && hasSIMD && len(p) > 0 {
		n := len(p32)
		g32, m32, v32 := any(g).([]float32)[:n], any(m).([]float32)[:n], any(v).([]float32)[:n]
		hs := [8]float32{float32(df), float32(b1), float32(b2), float32(ob1), float32(ob2), float32(step), float32(bc2), float32(eps)}
		adamWAVX512(&p32[0], &g32[0], &m32[0], &v32[0], n, &hs, decay) // adamWLoop 16 at a time (same bits)
		return
	}
	adamWLoop(p, g, m, v, df, b1, b2, ob1, ob2, step, bc2, eps, decay)
}

// adamWLoop is adamWKernel's scalar loop.
func adamWLoop[T scalar](p, g, m, v []T, df, b1, b2, ob1, ob2, step, bc2, eps T, decay bool) {
	for i := range p {
		if decay {
			p[i] *= df
		}
		gi := g[i]
		m[i] = b1*m[i] + ob1*gi
		v[i] = b2*v[i] + ob2*gi*gi
		denom := T(math.Sqrt(float64(v[i])))/bc2 + eps
		p[i] -= step * m[i] / denom
	}
}

// clipBlock is how many clipped gradients AdamW holds at a time per chunk of work (16 KiB).
const clipBlock = 4096

// scaleInto sets dst = src·alpha, each product rounded to FP32 (the values Scale leaves).
func scaleInto(dst, src []float32, alpha float32) {
	for i, x := range src[:len(dst)] {
		dst[i] = x * alpha
	}
}

// AdamW updates flat F32 buffers in place (see tensor.AdamWArgs): Params, Grads, ExpAvg and ExpAvgSq hold
// the same number of elements; each Segment is updated with its own decay flag (nil Segments: the whole
// buffer decays) and elements outside every segment are left untouched. Segments must lie inside the
// buffers and not overlap. As torch.optim.AdamW, it requires lr ≥ 0, eps ≥ 0, 0 ≤ β < 1, weight decay ≥ 0,
// and Step ≥ 1 (the step count after incrementing). With GradNorm the gradients are clipped as they are read
// (ClipByNorm's coefficient and products, applied to a copy). Errors: ErrDType for a non-F32 buffer, ErrShape for
// mismatched lengths or a bad segment, ErrArgument for a hyperparameter out of range.
func (b *Backend) AdamW(a tensor.AdamWArgs) (err error) {
	defer guard(&err, "AdamW", a.Params, a.Grads, a.ExpAvg, a.ExpAvgSq)
	c := newCheck("AdamW", a.Params, a.Grads, a.ExpAvg, a.ExpAvgSq).f32("Params", a.Params).
		f32("Grads", a.Grads).f32("ExpAvg", a.ExpAvg).f32("ExpAvgSq", a.ExpAvgSq)
	if c.Err() != nil {
		return c.Err()
	}
	if a.Skip != nil {
		c.tensor("Skip", a.Skip, tensor.I32).numel("Skip", a.Skip, 1)
	}
	if a.GradNorm != nil {
		c.tensor("GradNorm", a.GradNorm, tensor.I64).numel("GradNorm", a.GradNorm, 1)
	}
	if a.Table != nil || a.Row != nil {
		c.that(a.Table != nil && a.Row != nil, tensor.ErrArgument, "Table and Row are set together")
		c.tensor("Table", a.Table, tensor.F32).tensor("Row", a.Row, tensor.I32).numel("Row", a.Row, 1)
		if c.Err() == nil {
			c.that(a.Table.Numel() >= 3 && a.Table.Numel()%3 == 0, tensor.ErrShape, "Table holds %d values, want (K, 3), K ≥ 1", a.Table.Numel())
		}
		if c.Err() != nil {
			return c.Err()
		}
		a.LR, a.Step = 0, 1 // not used: the table's row holds the scalars
	}
	segs, err := opcheck.AdamW(a)
	if c.record(err).Err() != nil {
		return c.Err()
	}
	if a.Skip != nil && i32Of(a.Skip)[0] != 0 {
		return nil
	}
	h := newAdamWHyper(float64(a.LR), float64(a.Beta1), float64(a.Beta2), float64(a.Eps), float64(a.WeightDecay), a.Step)
	if a.Table != nil { // the row's float32 scalars, widened: adamWKernel rounds them back to the same values
		k := min(max(int(i32Of(a.Row)[0]), 0), a.Table.Numel()/3-1)
		row := f32Of(a.Table)[3*k : 3*k+3]
		h.decayFactor, h.stepSize, h.bc2Sqrt = float64(row[0]), float64(row[1]), float64(row[2])
	}
	coef, clips := float32(1), false
	if a.GradNorm != nil {
		coef, clips = clipBy(math.Float64frombits(uint64(i64Of(a.GradNorm)[0])), a.MaxGradNorm)
	}
	p, g, m, v := f32Of(a.Params), f32Of(a.Grads), f32Of(a.ExpAvg), f32Of(a.ExpAvgSq)
	for _, s := range segs {
		lo := s.Offset
		parallelFor(s.Len, 12, func(i, j int) {
			if !clips {
				adamWKernel(p[lo+i:lo+j], g[lo+i:lo+j], m[lo+i:lo+j], v[lo+i:lo+j], h, s.Decay)
				return
			}
			// ClipByNorm's products (Scale) in a small copy, block by block: Grads stays as it was.
			var buf [clipBlock]float32
			for a := lo + i; a < lo+j; a += clipBlock {
				e := min(a+clipBlock, lo+j)
				gs := buf[:e-a]
				scaleInto(gs, g[a:e], coef)
				adamWKernel(p[a:e], gs, m[a:e], v[a:e], h, s.Decay)
			}
		})
	}
	return nil
}
