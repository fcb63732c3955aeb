package cpu

import "github.com/tune-ml/tune/tensor"

// transpose12Kernel moves x (A, B, C, D) into out (A, C, B, D), D-element runs at a time. It is generic over
// the element so that same-dtype transposes move raw bits.
func transpose12Kernel[E any](out, x []E, a, b, c, d int) {
	for i := 0; i < a; i++ {
		for j := 0; j < b; j++ {
			for k := 0; k < c; k++ {
				src := ((i*b+j)*c + k) * d
				dst := ((i*c+k)*b + j) * d
				copy(out[dst:dst+d], x[src:src+d])
			}
		}
	}
}

// Transpose12 swaps axes 1 and 2: x (a, b, c, d) → out (a, c, b, d), as between (B, T, H, D) and (B, H, T, D).
// Both tensors hold a·b·c·d elements (their own shapes are not consulted); the dtypes may differ, in which
// case values are rounded to out's dtype. out must not overlap x. The backward is the same op with out and x
// exchanged (and b, c swapped).
func (bk *Backend) Transpose12(out, x *tensor.Tensor, a, b, c, d int) (err error) {
	defer guard(&err, "Transpose12", out, x)
	ck := newCheck("Transpose12", out, x).float("out", out).float("x", x)
	ck.that(a >= 0 && b >= 0 && c >= 0 && d >= 0, tensor.ErrArgument, "extents (%d, %d, %d, %d) must be ≥ 0", a, b, c, d)
	n := a * b * c * d
	ck.numel("out", out, n).numel("x", x, n)
	if ck.Err() != nil {
		return ck.Err()
	}
	switch {
	case out.DType == x.DType && x.DType == tensor.F32:
		transpose12Kernel(f32Of(out), f32Of(x), a, b, c, d)
	case out.DType == x.DType:
		transpose12Kernel(u16Of(out), u16Of(x), a, b, c, d)
	default:
		xv := load(x)
		o := overwrite(out)
		transpose12Kernel(o.V, xv, a, b, c, d)
		o.Store()
	}
	return nil
}
