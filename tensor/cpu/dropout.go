package cpu

import (
	"math"

	"github.com/tune-ml/tune/tensor"
)

// dropoutKernel: out[i] = x[i]·keep_i·(1/(1−p)) with keep_i ∈ {0, 1} drawn as tensor.PhiloxKeep(seed, offset,
// first+i, p) (first is the global index of x[0] in the stream). A dropped NaN stays NaN (0·NaN), as in
// PyTorch's fused dropout. The same call on dout is the backward. out may be x.
func dropoutKernel[T scalar](out, x []T, p float32, seed, offset uint64, first int) {
	scale := 1 / (1 - T(p))
	key := [2]uint32{uint32(seed), uint32(seed >> 32)}
	// u >= p  ⇔  (bits>>8)·2⁻²⁴ >= p  ⇔  bits>>8 >= ceil(p·2²⁴) (exact: p·2²⁴ is exact in float64)
	threshold := uint32(math.Ceil(float64(p) * (1 << 24)))
	keep := func(bits uint32) T {
		if bits>>8 >= threshold {
			return scale
		}
		return 0
	}
	i := 0
	var wide [64]uint32
	o32, _ := any(out).([]float32)
	x32, _ := any(x).([]float32)
	simd := hasSIMD && o32 != nil
	for i < len(x) {
		g := first + i
		if philox16 != nil && g%4 == 0 && len(x)-i >= 64 { // 16 blocks at once: element e is word e%4 of block e/4
			// philox16Fill is philox16 called directly, so that wide stays on the stack
			philox16Fill(offset+uint64(g/4), key, &wide)
			if simd { // the same products, 64 at a time
				dropApply64AVX512(&o32[i], &x32[i], &wide, threshold, float32(scale))
				i += 64
				continue
			}
			o, v := out[i:i+64:i+64], x[i:i+64:i+64]
			for e := range o {
				o[e] = v[e] * keep(wide[(e%4)*16+e/4])
			}
			i += 64
			continue
		}
		ctr := offset + uint64(g/4)
		blk := tensor.Philox4x32([4]uint32{uint32(ctr), uint32(ctr >> 32), 0, 0}, key)
		if lane := g % 4; lane != 0 || len(x)-i < 4 { // a partial block: element by element
			for ; lane < 4 && i < len(x); lane, i = lane+1, i+1 {
				out[i] = x[i] * keep(blk[lane])
			}
			continue
		}
		o, v := out[i:i+4:i+4], x[i:i+4:i+4]
		o[0], o[1], o[2], o[3] = v[0]*keep(blk[0]), v[1]*keep(blk[1]), v[2]*keep(blk[2]), v[3]*keep(blk[3])
		i += 4
	}
}

// Dropout sets out = x·keep/(1−p), keep drawn per element i by tensor.PhiloxKeep(seed, offset, i, p), so
// every backend draws the same mask (a caller drawing the next mask from the same seed advances offset by
// tensor.PhiloxCounters(x.Numel())). p must be in [0, 1) (ErrArgument); p == 0 copies. out may be x.
func (b *Backend) Dropout(out, x *tensor.Tensor, p float32, seed, offset uint64) error {
	return dropoutOp("Dropout", out, x, p, seed, offset)
}

// DropoutBackward sets dx = dout·keep/(1−p), regenerating the forward's mask from the same (seed, offset).
func (b *Backend) DropoutBackward(dx, dout *tensor.Tensor, p float32, seed, offset uint64) error {
	return dropoutOp("DropoutBackward", dx, dout, p, seed, offset)
}

func dropoutOp(op string, out, x *tensor.Tensor, p float32, seed, offset uint64) (err error) {
	defer guard(&err, op, out, x)
	c := newCheck(op, out, x).float("out", out).float("in", x)
	if c.Err() != nil {
		return c.Err()
	}
	c.numel("in", x, out.Numel()).that(p >= 0 && p < 1 && !math.IsNaN(float64(p)), tensor.ErrArgument, "p = %v, want 0 ≤ p < 1", p)
	if c.Err() != nil {
		return c.Err()
	}
	xv := load(x)
	o := overwrite(out)
	if p == 0 {
		copy(o.V, xv)
	} else {
		parallelFor(len(xv), 16, func(lo, hi int) { dropoutKernel(o.V[lo:hi], xv[lo:hi], p, seed, offset, lo) })
	}
	o.Store()
	return nil
}
