package cpu

import (
	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// ropeKernel rotates one row of D = 2·len(c) elements held as its halves x1 = x[:D/2], x2 = x[D/2:] in place,
// by transformers' apply_rotary_pos_emb (models/llama/modeling_llama.py): q·cos + rotate_half(q)·sin with
// rotate_half(x) = cat(−x2, x1) and cos, sin repeated over both halves (emb = cat(freqs, freqs)), so
//
//	x1' = x1·c − x2·s,   x2' = x2·c + x1·s
//
// and with inverse the transposed rotation (Rᵀ, the backward: the angle negated):
//
//	x1' = x1·c + x2·s,   x2' = x2·c − x1·s
func ropeKernel[T scalar](x1, x2, c, s []T, inverse bool) {
	for i, ci := range c {
		a, b, si := x1[i], x2[i], s[i]
		if inverse {
			si = -si
		}
		x1[i] = a*ci - b*si
		x2[i] = b*ci + a*si
	}
}

// RoPE rotates the strided (B, H, T, D) operand x in place (rotate-half convention; see ropeKernel), row
// (b, h, t) by the angles of table row positions[b, t]: cos and sin are (P, D/2) F32, positions (B, T) I32
// with every value in [0, P) (ErrArgument otherwise, nothing written). Math in FP32, rounded once to x's
// dtype. inverse applies Rᵀ (the backward).
func (b *Backend) RoPE(x tensor.AttnOperand, bsz, h, t, d int, positions, cos, sin *tensor.Tensor, inverse bool) (err error) {
	const op = "RoPE"
	defer guard(&err, op, x.T, positions, cos, sin)
	c := newCheck(op, x.T, positions, cos, sin).float("x", x.T).tensor("positions", positions, tensor.I32).
		f32("cos", cos).f32("sin", sin)
	if c.Err() != nil {
		return c.Err()
	}
	g, gerr := opcheck.RoPEGeometry(x, bsz, h, t, d, positions, cos, sin)
	if c.record(gerr).Err() != nil {
		return c.Err()
	}
	pos := i32Of(positions)
	if c.record(opcheck.Positions(pos, t, g.P)).Err() != nil || len(pos) == 0 || h == 0 || d == 0 {
		return c.Err()
	}
	cv, sv := f32Of(cos), f32Of(sin)
	half := g.Half
	bf := bufOf(x.T)
	parallelFor(bsz*h*t, 6*d, func(lo, hi int) {
		var row []float32
		if x.T.DType != tensor.F32 {
			row = make([]float32, d)
		}
		for r := lo; r < hi; r++ {
			bi, hd, ti := r/(h*t), r/t%h, r%t
			at := x.T.Offset + bi*g.StrideB + hd*g.StrideH + ti*g.StrideT
			p := int(pos[bi*t+ti])
			ct, st := cv[p*half:(p+1)*half], sv[p*half:(p+1)*half]
			if x.T.DType == tensor.F32 {
				v := bf.f32[at : at+d]
				ropeKernel(v[:half], v[half:], ct, st, inverse)
				continue
			}
			raw := bf.u16[at : at+d]
			tensor.WidenHalf(row, raw, x.T.DType)
			ropeKernel(row[:half], row[half:], ct, st, inverse)
			tensor.NarrowHalf(raw, row, x.T.DType)
		}
	})
	return nil
}
