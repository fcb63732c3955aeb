package cpu

import (
	"fmt"
	"math"

	"github.com/tune-ml/tune/tensor"
)

// Alloc returns a zero-filled tensor of dtype dt and the given shape, the sole owner of a new buffer.
// Errors: ErrDType for Invalid or an unknown dtype, ErrShape for a negative extent.
func (b *Backend) Alloc(dt tensor.DType, shape ...int) (*tensor.Tensor, error) {
	s := tensor.Shape(append([]int(nil), shape...))
	fail := func(cause error) error {
		return &tensor.OpError{Op: "Alloc", Shapes: []tensor.Shape{s}, Err: cause}
	}
	if dt.Size() == 0 {
		return nil, fail(fmt.Errorf("%w: cannot allocate %v (want F32, F16, BF16, I32 or I64)", tensor.ErrDType, dt))
	}
	for _, d := range s {
		if d < 0 {
			return nil, fail(fmt.Errorf("%w: negative extent in shape %v", tensor.ErrShape, s))
		}
	}
	bf := newBuffer(dt, s.Numel())
	t := &tensor.Tensor{Shape: s, DType: dt, Buf: bf}
	bf.owner = t
	return t, nil
}

// Free releases t's buffer when t is the tensor Alloc returned for it; for a view, nil, or a tensor of another
// backend it does nothing. Any later op on a tensor of a freed buffer fails with ErrArgument.
func (b *Backend) Free(t *tensor.Tensor) {
	if t == nil {
		return
	}
	bf, ok := t.Buf.(*buffer)
	if !ok || bf.owner != t {
		return
	}
	*bf = buffer{dt: bf.dt, freed: true}
}

// Upload copies host data into dst: src is []float32 for a float dst (rounded to F16/BF16 with
// round-to-nearest-even), []uint16 raw bits for an F16/BF16 dst, []int32 for I32 and []int64 for I64.
// len(src) must equal dst.Numel() (ErrShape); any other pairing is ErrDType.
func (b *Backend) Upload(dst *tensor.Tensor, src any) (err error) {
	defer guard(&err, "Upload", dst)
	c := newCheck("Upload", dst).tensor("dst", dst)
	if c.Err() != nil {
		return c.Err()
	}
	n := dst.Numel()
	switch s := src.(type) {
	case []float32:
		c.that(dst.DType.IsFloat(), tensor.ErrDType, "[]float32 uploads into a float tensor, not %v", dst.DType)
		c.that(len(s) == n, tensor.ErrShape, "src has %d values, dst has %d elements", len(s), n)
		if c.Err() != nil {
			return c.Err()
		}
		if dst.DType == tensor.F32 {
			copy(f32Of(dst), s)
		} else {
			tensor.NarrowHalf(u16Of(dst), s, dst.DType)
		}
	case []uint16:
		c.that(dst.DType.IsHalf(), tensor.ErrDType, "[]uint16 bits upload into an F16 or BF16 tensor, not %v", dst.DType)
		c.that(len(s) == n, tensor.ErrShape, "src has %d values, dst has %d elements", len(s), n)
		if c.Err() == nil {
			copy(u16Of(dst), s)
		}
	case []int32:
		c.that(dst.DType == tensor.I32, tensor.ErrDType, "[]int32 uploads into an I32 tensor, not %v", dst.DType)
		c.that(len(s) == n, tensor.ErrShape, "src has %d values, dst has %d elements", len(s), n)
		if c.Err() == nil {
			copy(i32Of(dst), s)
		}
	case []int64:
		c.that(dst.DType == tensor.I64, tensor.ErrDType, "[]int64 uploads into an I64 tensor, not %v", dst.DType)
		c.that(len(s) == n, tensor.ErrShape, "src has %d values, dst has %d elements", len(s), n)
		if c.Err() == nil {
			copy(i64Of(dst), s)
		}
	default:
		c.fail(tensor.ErrDType, "src is %T; want []float32, []uint16, []int32 or []int64", src)
	}
	return c.Err()
}

// Download copies src to the host: dst is []float32 for any float src (F16/BF16 widened exactly), []uint16
// for raw F16/BF16 bits, []int32 for I32 and []int64 for I64. len(dst) must equal src.Numel() (ErrShape).
func (b *Backend) Download(dst any, src *tensor.Tensor) (err error) {
	defer guard(&err, "Download", src)
	c := newCheck("Download", src).tensor("src", src)
	if c.Err() != nil {
		return c.Err()
	}
	n := src.Numel()
	switch d := dst.(type) {
	case []float32:
		c.that(src.DType.IsFloat(), tensor.ErrDType, "[]float32 receives a float tensor, not %v", src.DType)
		c.that(len(d) == n, tensor.ErrShape, "dst has room for %d values, src has %d elements", len(d), n)
		if c.Err() != nil {
			return c.Err()
		}
		if src.DType == tensor.F32 {
			copy(d, f32Of(src))
		} else {
			tensor.WidenHalf(d, u16Of(src), src.DType)
		}
	case []uint16:
		c.that(src.DType.IsHalf(), tensor.ErrDType, "[]uint16 receives F16 or BF16 bits, not %v", src.DType)
		c.that(len(d) == n, tensor.ErrShape, "dst has room for %d values, src has %d elements", len(d), n)
		if c.Err() == nil {
			copy(d, u16Of(src))
		}
	case []int32:
		c.that(src.DType == tensor.I32, tensor.ErrDType, "[]int32 receives an I32 tensor, not %v", src.DType)
		c.that(len(d) == n, tensor.ErrShape, "dst has room for %d values, src has %d elements", len(d), n)
		if c.Err() == nil {
			copy(d, i32Of(src))
		}
	case []int64:
		c.that(src.DType == tensor.I64, tensor.ErrDType, "[]int64 receives an I64 tensor, not %v", src.DType)
		c.that(len(d) == n, tensor.ErrShape, "dst has room for %d values, src has %d elements", len(d), n)
		if c.Err() == nil {
			copy(d, i64Of(src))
		}
	default:
		c.fail(tensor.ErrDType, "dst is %T; want []float32, []uint16, []int32 or []int64", dst)
	}
	return c.Err()
}

// Copy sets dst = src for tensors of one dtype and equal element count (shapes may differ). Overlapping views
// of one buffer are copied as if through a temporary.
func (b *Backend) Copy(dst, src *tensor.Tensor) (err error) {
	defer guard(&err, "Copy", dst, src)
	c := newCheck("Copy", dst, src).tensor("dst", dst).tensor("src", src)
	if c.Err() != nil {
		return c.Err()
	}
	c.that(dst.DType == src.DType, tensor.ErrDType, "dst is %v, src is %v (use Cast to convert)", dst.DType, src.DType)
	c.numel("dst", dst, src.Numel())
	if c.Err() != nil {
		return c.Err()
	}
	switch src.DType {
	case tensor.F32:
		copy(f32Of(dst), f32Of(src))
	case tensor.F16, tensor.BF16:
		copy(u16Of(dst), u16Of(src))
	case tensor.I32:
		copy(i32Of(dst), i32Of(src))
	case tensor.I64:
		copy(i64Of(dst), i64Of(src))
	}
	return nil
}

// Fill sets every element of x to v, rounded once to x's dtype. For an integer x, v must be a whole number
// within the type's range (ErrArgument otherwise), so Fill(labels, -100) works.
func (b *Backend) Fill(x *tensor.Tensor, v float32) (err error) {
	defer guard(&err, "Fill", x)
	c := newCheck("Fill", x).tensor("x", x)
	if c.Err() != nil {
		return c.Err()
	}
	switch x.DType {
	case tensor.F32:
		fillSlice(f32Of(x), v)
	case tensor.F16:
		fillSlice(u16Of(x), tensor.F32ToF16(v))
	case tensor.BF16:
		fillSlice(u16Of(x), tensor.F32ToBF16(v))
	case tensor.I32:
		c.that(v == float32(math.Trunc(float64(v))) && v >= math.MinInt32 && v <= math.MaxInt32, tensor.ErrArgument, "%v is not an int32 value", v)
		if c.Err() == nil {
			fillSlice(i32Of(x), int32(v))
		}
	case tensor.I64:
		c.that(v == float32(math.Trunc(float64(v))) && v >= math.MinInt64 && v < math.MaxInt64, tensor.ErrArgument, "%v is not an int64 value", v)
		if c.Err() == nil {
			fillSlice(i64Of(x), int64(v))
		}
	}
	return c.Err()
}

func fillSlice[E any](s []E, v E) {
	for i := range s {
		s[i] = v
	}
}

// Cast sets dst = src converted to dst's dtype, for float tensors of equal element count: widening is exact,
// narrowing rounds to nearest even (F16↔BF16 goes through the exact FP32 value, so it rounds once).
func (b *Backend) Cast(dst, src *tensor.Tensor) (err error) {
	defer guard(&err, "Cast", dst, src)
	c := newCheck("Cast", dst, src).float("dst", dst).float("src", src)
	if c.Err() != nil {
		return c.Err()
	}
	if c.numel("dst", dst, src.Numel()).Err() != nil {
		return c.Err()
	}
	switch {
	case dst.DType == src.DType:
		return b.Copy(dst, src)
	case src.DType == tensor.F32:
		tensor.NarrowHalf(u16Of(dst), f32Of(src), dst.DType)
	case dst.DType == tensor.F32:
		tensor.WidenHalf(f32Of(dst), u16Of(src), src.DType)
	default:
		tensor.NarrowHalf(u16Of(dst), load(src), dst.DType)
	}
	return nil
}
