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
	threshold := tensor.PhiloxThreshold(p) // keep ⇔ the element's 16-bit slice ≥ threshold
	keep := func(slice uint32) T {
		if slice >= threshold {
			return scale
		}
		return 0
	}
	const per = tensor.PhiloxSlices
	i := 0
	var wide, lanes [64]uint32
	o32, _ := any(out).([]float32)
	x32, _ := any(x).([]float32)
	simd := hasSIMD && o32 != nil
	for i < len(x) {
		g := first + i
		if philox16 != nil && g%per == 0 && len(x)-i >= 16*per { // 16 blocks at once: element e is slice e%8 of block e/8
			// philox16Fill is philox16 called directly, so that wide stays on the stack; word w of block j is
			// wide[16w + j], so element e's slice lives in word (e%8)/2 of block e/8.
			philox16Fill(offset+uint64(g/per), key, &wide)
			for h := 0; h < 2; h++ {
				o, v := out[i:i+64:i+64], x[i:i+64:i+64]
				if simd { // the same products, 64 at a time: dropApply64AVX512 reads element e's draw in the
					// top 24 bits of lanes[(e%4)·16 + e/4]
					for e := range 64 {
						ee := 64*h + e
						lanes[(e%4)*16+e/4] = (wide[16*((ee%per)/2)+ee/per] >> (16 * (ee % 2)) & 0xffff) << 8
					}
					dropApply64AVX512(&o32[i], &x32[i], &lanes, threshold, float32(scale))
				} else {
					for e := range o {
						ee := 64*h + e
						o[e] = v[e] * keep(wide[16*((ee%per)/2)+ee/per]>>(16*(ee%2))&0xffff)
					}
				}
				i += 64
			}
			continue
		}
		ctr := offset + uint64(g/per)
		blk := tensor.Philox4x32([4]uint32{uint32(ctr), uint32(ctr >> 32), 0, 0}, key)
		for s := g % per; s < per && i < len(x); s, i = s+1, i+1 {
			out[i] = x[i] * keep(tensor.PhiloxSlice(blk, s))
		}
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
