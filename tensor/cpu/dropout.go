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
	var blk [4]uint32
	blkIdx := -1
	for i, v := range x {
		g := first + i
		if g/4 != blkIdx { // one Philox block serves four consecutive elements
			blkIdx = g / 4
			ctr := offset + uint64(blkIdx)
			blk = tensor.Philox4x32([4]uint32{uint32(ctr), uint32(ctr >> 32), 0, 0}, key)
		}
		u := float32(blk[g%4]>>8) * (1.0 / (1 << 24)) // tensor.PhiloxUniform
		var keep T
		if u >= p {
			keep = 1
		}
		out[i] = v * keep * scale
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
