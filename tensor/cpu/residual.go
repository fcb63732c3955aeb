package cpu

import (
	"math"

	"github.com/tune-ml/tune/tensor"
)

// ResidualLayerNorm runs the block tail LayerNorm(dropout(Y) + X) as the ops it fuses, in order: Dropout
// into a scratch copy of Y's dtype, Add into Sum, LayerNorm into Out, Mean and Rstd, and Cast into OutHalf
// when set (tensor.ResidualNormArgs). It is the reference the fused kernels of other backends match bit for
// bit on their own ops.
func (b *Backend) ResidualLayerNorm(a tensor.ResidualNormArgs) (err error) {
	const op = "ResidualLayerNorm"
	args := []*tensor.Tensor{a.Sum, a.Out, a.OutHalf, a.Mean, a.Rstd, a.Y, a.X, a.Gamma, a.Beta}
	defer guard(&err, op, args...)
	c := newCheck(op, args...).float("Sum", a.Sum).float("Out", a.Out).f32("Mean", a.Mean).f32("Rstd", a.Rstd).
		float("Y", a.Y).float("X", a.X).float("Gamma", a.Gamma).float("Beta", a.Beta)
	if a.OutHalf != nil {
		c.float("OutHalf", a.OutHalf)
	}
	n, ch := c.rows("Sum", a.Sum)
	c.numel("Out", a.Out, n*ch).numel("Y", a.Y, n*ch).numel("X", a.X, n*ch).numel("Mean", a.Mean, n).
		numel("Rstd", a.Rstd, n).numel("Gamma", a.Gamma, ch).numel("Beta", a.Beta, ch)
	if a.OutHalf != nil {
		c.numel("OutHalf", a.OutHalf, n*ch)
	}
	p := a.DropoutP
	c.that(p >= 0 && p < 1 && !math.IsNaN(float64(p)), tensor.ErrArgument, "DropoutP = %v, want 0 ≤ p < 1", p)
	c.that(a.Eps >= 0, tensor.ErrArgument, "Eps = %v, want ≥ 0", a.Eps)
	if c.Err() != nil {
		return c.Err()
	}
	y := a.Y
	if p > 0 {
		if y, err = b.Alloc(a.Y.DType, a.Y.Shape...); err != nil {
			return err
		}
		defer b.Free(y)
		if err := b.Dropout(y, a.Y, p, a.Seed, a.Offset); err != nil {
			return err
		}
	}
	if err := b.Add(a.Sum, y, a.X); err != nil {
		return err
	}
	if err := b.LayerNorm(a.Out, a.Mean, a.Rstd, a.Sum, a.Gamma, a.Beta, a.Eps); err != nil {
		return err
	}
	if a.OutHalf != nil {
		return b.Cast(a.OutHalf, a.Out)
	}
	return nil
}

// ResidualLayerNormBackward runs LayerNormBackward, then DropoutBackward (a Cast when DropoutP is 0) of its
// dx into DY, then BiasGrad of DY into DBias when set (tensor.ResidualNormBackwardArgs).
func (b *Backend) ResidualLayerNormBackward(a tensor.ResidualNormBackwardArgs) (err error) {
	const op = "ResidualLayerNormBackward"
	args := []*tensor.Tensor{a.DX, a.DY, a.DGamma, a.DBeta, a.DBias, a.DOut, a.X, a.Gamma, a.Mean, a.Rstd}
	defer guard(&err, op, args...)
	c := newCheck(op, args...).float("DX", a.DX).float("DY", a.DY)
	p := a.DropoutP
	c.numel("DY", a.DY, a.DX.Numel()).that(p >= 0 && p < 1 && !math.IsNaN(float64(p)), tensor.ErrArgument, "DropoutP = %v, want 0 ≤ p < 1", p)
	if c.Err() != nil {
		return c.Err()
	}
	if err := b.LayerNormBackward(a.DX, a.DGamma, a.DBeta, a.DOut, a.X, a.Gamma, a.Mean, a.Rstd); err != nil {
		return err
	}
	if p == 0 {
		err = b.Cast(a.DY, a.DX)
	} else {
		err = b.DropoutBackward(a.DY, a.DX, p, a.Seed, a.Offset)
	}
	if err != nil || a.DBias == nil {
		return err
	}
	return b.BiasGrad(a.DBias, a.DY)
}

// ResidualRMSNorm runs Add into Sum, then RMSNorm of Sum into Out and Rstd (tensor.ResidualRMSNormArgs): the
// reference the fused kernels of other backends match bit for bit on their own ops.
func (b *Backend) ResidualRMSNorm(a tensor.ResidualRMSNormArgs) (err error) {
	const op = "ResidualRMSNorm"
	args := []*tensor.Tensor{a.Sum, a.Out, a.Rstd, a.X, a.Y, a.Weight}
	defer guard(&err, op, args...)
	c := newCheck(op, args...).float("Sum", a.Sum).float("Out", a.Out).f32("Rstd", a.Rstd).float("X", a.X).
		float("Y", a.Y).float("Weight", a.Weight)
	n, ch := c.rows("Sum", a.Sum)
	c.numel("Out", a.Out, n*ch).numel("X", a.X, n*ch).numel("Y", a.Y, n*ch).numel("Rstd", a.Rstd, n).
		numel("Weight", a.Weight, ch).that(a.Eps >= 0, tensor.ErrArgument, "Eps = %v, want ≥ 0", a.Eps)
	if c.Err() != nil {
		return c.Err()
	}
	if err := b.Add(a.Sum, a.X, a.Y); err != nil {
		return err
	}
	return b.RMSNorm(a.Out, a.Rstd, a.Sum, a.Weight, a.Eps)
}

// ResidualRMSNormBackward runs RMSNormBackward into a scratch of DX's dtype, then Axpy (Accumulate) or Copy
// of it into DX, then Cast of DX into DXHalf when set (tensor.ResidualRMSNormBackwardArgs).
func (b *Backend) ResidualRMSNormBackward(a tensor.ResidualRMSNormBackwardArgs) (err error) {
	const op = "ResidualRMSNormBackward"
	args := []*tensor.Tensor{a.DX, a.DXHalf, a.DWeight, a.DOut, a.X, a.Weight, a.Rstd}
	defer guard(&err, op, args...)
	c := newCheck(op, args...).float("DX", a.DX).float("X", a.X)
	if a.DXHalf != nil {
		c.float("DXHalf", a.DXHalf).numel("DXHalf", a.DXHalf, a.DX.Numel())
	}
	c.numel("DX", a.DX, a.X.Numel())
	if c.Err() != nil {
		return c.Err()
	}
	dx, err := b.Alloc(a.DX.DType, a.DX.Shape...)
	if err != nil {
		return err
	}
	defer b.Free(dx)
	if err := b.RMSNormBackward(dx, a.DWeight, a.DOut, a.X, a.Weight, a.Rstd); err != nil {
		return err
	}
	if a.Accumulate {
		err = b.Axpy(a.DX, dx, 1)
	} else {
		err = b.Copy(a.DX, dx)
	}
	if err != nil || a.DXHalf == nil {
		return err
	}
	return b.Cast(a.DXHalf, a.DX)
}
