package cpu

import (
	"fmt"
	"math"

	"github.com/tune-ml/tune/tensor"
)

// sumSquares returns Σ v² of an FP32 slice in float64, per fixed chunk and then over chunks in order.
func sumSquares(v []float32) float64 {
	_, chunks := chunking(len(v), 2)
	partial := make([]float64, chunks)
	parallelChunks(len(v), 2, func(k, lo, hi int) {
		var s float64
		for _, x := range v[lo:hi] {
			s += float64(x) * float64(x)
		}
		partial[k] = s
	})
	var s float64
	for _, p := range partial {
		s += p
	}
	return s
}

// GlobalNorm returns the L2 norm of all elements of all float tensors, sqrt(Σ_t Σ_i t_i²), accumulated in
// float64 (torch.nn.utils.clip_grad_norm_'s total norm with norm_type 2). An Inf or NaN element gives a
// non-finite norm. An empty list gives 0.
func (b *Backend) GlobalNorm(ts []*tensor.Tensor) (norm float64, err error) {
	defer guard(&err, "GlobalNorm", ts...)
	c := newCheck("GlobalNorm", ts...)
	for i, t := range ts {
		c.float(fmt.Sprintf("ts[%d]", i), t)
	}
	if c.Err() != nil {
		return 0, c.Err()
	}
	var sum float64
	for _, t := range ts {
		sum += sumSquares(load(t))
	}
	return math.Sqrt(sum), nil
}

// NonFiniteCheckAndUnscale multiplies every element of every F32 tensor by invScale in place (skipped when
// invScale == 1) and reports whether any element was Inf or NaN before scaling, as PyTorch's
// _amp_foreach_non_finite_check_and_unscale_. All tensors are validated before any is changed; a half
// tensor is ErrDType (unscale FP32 master gradients, not half copies).
func (b *Backend) NonFiniteCheckAndUnscale(ts []*tensor.Tensor, invScale float32) (foundInf bool, err error) {
	defer guard(&err, "NonFiniteCheckAndUnscale", ts...)
	c := newCheck("NonFiniteCheckAndUnscale", ts...)
	for i, t := range ts {
		c.f32(fmt.Sprintf("ts[%d]", i), t)
	}
	if c.Err() != nil {
		return false, c.Err()
	}
	for _, t := range ts {
		v := f32Of(t)
		_, chunks := chunking(len(v), 2)
		found := make([]bool, chunks)
		parallelChunks(len(v), 2, func(k, lo, hi int) {
			found[k] = checkAndUnscale(v[lo:hi], invScale)
		})
		for _, f := range found {
			foundInf = foundInf || f
		}
	}
	return foundInf, nil
}

// checkAndUnscale scales v by invScale (unless 1) and reports whether any value was non-finite. NaN stays
// NaN and Inf stays Inf (for invScale > 0).
func checkAndUnscale(v []float32, invScale float32) bool {
	found := false
	for i, x := range v {
		if x-x != 0 { // Inf − Inf and NaN − NaN are NaN; finite x − x is 0
			found = true
		}
		if invScale != 1 {
			v[i] = x * invScale
		}
	}
	return found
}

// GlobalNormTo writes GlobalNorm(ts) into norm, an I64 (1) tensor, as the bits of the float64 (math.Float64bits).
func (b *Backend) GlobalNormTo(norm *tensor.Tensor, ts []*tensor.Tensor) (err error) {
	defer guard(&err, "GlobalNormTo", append([]*tensor.Tensor{norm}, ts...)...)
	if err := newCheck("GlobalNormTo", norm).tensor("norm", norm, tensor.I64).numel("norm", norm, 1).Err(); err != nil {
		return err
	}
	total, err := b.GlobalNorm(ts)
	if err != nil {
		return err
	}
	i64Of(norm)[0] = int64(math.Float64bits(total))
	return nil
}

// ClipByNorm scales ts by torch.nn.utils.clip_grad_norm_'s clip coefficient from the float64 whose bits norm
// (I64 (1)) holds: (1/(float32(total)+1e-6))·maxNorm in FP32, applied when total is finite and the coefficient
// is below 1 (maxNorm 0: never); a non-finite total sets nonFinite (I32 (1), when non-nil) to 1 instead.
func (b *Backend) ClipByNorm(ts []*tensor.Tensor, norm *tensor.Tensor, maxNorm float32, nonFinite *tensor.Tensor) (err error) {
	defer guard(&err, "ClipByNorm", append([]*tensor.Tensor{norm, nonFinite}, ts...)...)
	c := newCheck("ClipByNorm", norm).tensor("norm", norm, tensor.I64).numel("norm", norm, 1)
	if nonFinite != nil {
		c.tensor("nonFinite", nonFinite, tensor.I32).numel("nonFinite", nonFinite, 1)
	}
	for i, t := range ts {
		c.float(fmt.Sprintf("ts[%d]", i), t)
	}
	c.that(maxNorm >= 0 && !math.IsInf(float64(maxNorm), 0), tensor.ErrArgument, "maxNorm %v must be finite and ≥ 0", maxNorm)
	if c.Err() != nil {
		return c.Err()
	}
	total := math.Float64frombits(uint64(i64Of(norm)[0]))
	if math.IsNaN(total) || math.IsInf(total, 0) {
		if nonFinite != nil {
			i32Of(nonFinite)[0] = 1
		}
		return nil
	}
	coef, clips := clipBy(total, maxNorm)
	if !clips {
		return nil
	}
	for _, t := range ts {
		if err := b.Scale(t, coef); err != nil {
			return err
		}
	}
	return nil
}

// clipCoef is torch.nn.utils.clip_grad_norm_'s clip_coef = max_norm / (total_norm + 1e-6) on FP32 tensors,
// which Tensor.__rdiv__ evaluates as reciprocal(total_norm + 1e-6) * max_norm, each step rounded to FP32.
func clipCoef(total float64, maxNorm float32) float32 {
	return (1 / (float32(total) + 1e-6)) * maxNorm
}

// clipBy returns ClipByNorm's coefficient for the norm total and whether ClipByNorm scales by it: total
// finite, maxNorm > 0 and the coefficient below 1.
func clipBy(total float64, maxNorm float32) (float32, bool) {
	if math.IsNaN(total) || math.IsInf(total, 0) || !(maxNorm > 0) {
		return 1, false
	}
	coef := clipCoef(total, maxNorm)
	return coef, coef < 1
}
