//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/tune-ml/tune/tensor"
)

// Alloc returns a zero-filled tensor of dtype dt and the given shape, the sole owner of a block from the
// caching allocator (the zero fill is queued on the stream). Errors: ErrDType for Invalid, ErrShape for a
// negative extent, CUDA_ERROR_OUT_OF_MEMORY (after the cache was released and the request retried) naming the
// allocator's state.
func (b *Backend) Alloc(dtype tensor.DType, shape ...int) (t *tensor.Tensor, err error) {
	s := tensor.Shape(append([]int(nil), shape...))
	o := b.begin("Alloc")
	defer o.end(&err)
	o.args = []*tensor.Tensor{{Shape: s, DType: dtype}}
	if dtype.Size() == 0 {
		o.failf(tensor.ErrDType, "cannot allocate %v (want F32, F16, BF16, I32 or I64)", dtype)
		return nil, o.err
	}
	for _, d := range s {
		if d < 0 {
			o.failf(tensor.ErrShape, "negative extent in shape %v", s)
			return nil, o.err
		}
	}
	n := s.Numel()
	bytes := int64(n) * int64(dtype.Size())
	p, c, aerr := b.alloc.get(bytes)
	if aerr != nil {
		o.fail(driverErr("cuMemAlloc", aerr, "%d bytes for %v%v (%s)", bytes, dtype, s, b.memSummary()))
		return nil, o.err
	}
	if bytes > 0 {
		if o.fail(o.stream(func() []byte { return fmt.Appendf(nil, "memset8 %x %d", p, bytes) }, func() error {
			return driverErr("cuMemsetD8Async", cu.MemsetD8Async(p, 0, bytes, b.stream), "zero-filling %d bytes", bytes)
		})) != nil {
			b.alloc.put(p, c)
			return nil, o.err
		}
	}
	bf := &buffer{b: b, ptr: p, n: n, dt: dtype, class: c}
	t = &tensor.Tensor{Shape: s, DType: dtype, Buf: bf}
	bf.owner = t
	return t, nil
}

// Free returns t's block to the allocator's cache when t is the tensor Alloc returned for it; for a view, nil,
// or a tensor of another backend it does nothing. Work already queued on the block still completes first
// (the stream orders it). Any later op on a tensor of the freed buffer fails with ErrArgument.
func (b *Backend) Free(t *tensor.Tensor) {
	if t == nil {
		return
	}
	bf, ok := t.Buf.(*buffer)
	if !ok || bf.b != b || bf.owner != t || bf.freed {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forgetRange(uint64(bf.ptr), uint64(bf.ptr)+uint64(bf.n*bf.dt.Size()))
	b.alloc.put(bf.ptr, bf.class)
	bf.freed, bf.ptr, bf.class = true, 0, 0
}

// Upload copies host data into dst: src is []float32 for a float dst (rounded to F16/BF16 on the host with
// tensor.F32ToF16 / F32ToBF16), []uint16 raw bits for an F16/BF16 dst, []int32 for I32 and []int64 for I64.
// len(src) must equal dst.Numel() (ErrShape); any other pairing is ErrDType. The copy is queued; src may be
// reused as soon as Upload returns.
func (b *Backend) Upload(dst *tensor.Tensor, src any) (err error) {
	o := b.begin("Upload", dst)
	defer o.end(&err)
	o.tensor("dst", dst)
	if o.failed() {
		return
	}
	n := dst.Numel()
	var host unsafe.Pointer
	var keep any
	switch s := src.(type) {
	case []float32:
		o.that(dst.DType.IsFloat(), tensor.ErrDType, "[]float32 uploads into a float tensor, not %v", dst.DType)
		o.that(len(s) == n, tensor.ErrShape, "src has %d values, dst has %d elements", len(s), n)
		if o.failed() || n == 0 {
			return
		}
		if dst.DType == tensor.F32 {
			host, keep = unsafe.Pointer(&s[0]), s
		} else {
			h := make([]uint16, n)
			tensor.NarrowHalf(h, s, dst.DType)
			host, keep = unsafe.Pointer(&h[0]), h
		}
	case []uint16:
		o.that(dst.DType.IsHalf(), tensor.ErrDType, "[]uint16 bits upload into an F16 or BF16 tensor, not %v", dst.DType)
		o.that(len(s) == n, tensor.ErrShape, "src has %d values, dst has %d elements", len(s), n)
		if o.failed() || n == 0 {
			return
		}
		host, keep = unsafe.Pointer(&s[0]), s
	case []int32:
		o.that(dst.DType == tensor.I32, tensor.ErrDType, "[]int32 uploads into an I32 tensor, not %v", dst.DType)
		o.that(len(s) == n, tensor.ErrShape, "src has %d values, dst has %d elements", len(s), n)
		if o.failed() || n == 0 {
			return
		}
		host, keep = unsafe.Pointer(&s[0]), s
	case []int64:
		o.that(dst.DType == tensor.I64, tensor.ErrDType, "[]int64 uploads into an I64 tensor, not %v", dst.DType)
		o.that(len(s) == n, tensor.ErrShape, "src has %d values, dst has %d elements", len(s), n)
		if o.failed() || n == 0 {
			return
		}
		host, keep = unsafe.Pointer(&s[0]), s
	default:
		o.failf(tensor.ErrDType, "src is %T; want []float32, []uint16, []int32 or []int64", src)
		return
	}
	// The bytes are copied out of host before this returns (into the page-locked ring, staging.go, or by the
	// driver's own staging), so the caller may reuse it at once.
	if o.fail(o.hostToDevice(addr(dst), host, dst.Bytes(), "Upload")) == nil &&
		!dst.DType.IsFloat() && b.keepIDs {
		b.rememberIDs(dst, src) // the id-taking ops check these values without reading them back (hostids.go)
	}
	runtime.KeepAlive(keep)
	return
}

// Download waits for queued work and copies src to the host: dst is []float32 for any float src (F16/BF16
// widened exactly), []uint16 for raw F16/BF16 bits, []int32 for I32 and []int64 for I64. len(dst) must equal
// src.Numel() (ErrShape).
func (b *Backend) Download(dst any, src *tensor.Tensor) (err error) {
	o := b.begin("Download", src)
	defer o.end(&err)
	o.tensor("src", src)
	if o.failed() {
		return
	}
	n := src.Numel()
	var host unsafe.Pointer
	var widenTo []float32
	var bits []uint16
	switch d := dst.(type) {
	case []float32:
		o.that(src.DType.IsFloat(), tensor.ErrDType, "[]float32 receives a float tensor, not %v", src.DType)
		o.that(len(d) == n, tensor.ErrShape, "dst has room for %d values, src has %d elements", len(d), n)
		if o.failed() || n == 0 {
			return
		}
		if src.DType == tensor.F32 {
			host = unsafe.Pointer(&d[0])
		} else {
			bits = make([]uint16, n)
			host, widenTo = unsafe.Pointer(&bits[0]), d
		}
	case []uint16:
		o.that(src.DType.IsHalf(), tensor.ErrDType, "[]uint16 receives F16 or BF16 bits, not %v", src.DType)
		o.that(len(d) == n, tensor.ErrShape, "dst has room for %d values, src has %d elements", len(d), n)
		if o.failed() || n == 0 {
			return
		}
		host = unsafe.Pointer(&d[0])
	case []int32:
		o.that(src.DType == tensor.I32, tensor.ErrDType, "[]int32 receives an I32 tensor, not %v", src.DType)
		o.that(len(d) == n, tensor.ErrShape, "dst has room for %d values, src has %d elements", len(d), n)
		if o.failed() || n == 0 {
			return
		}
		host = unsafe.Pointer(&d[0])
	case []int64:
		o.that(src.DType == tensor.I64, tensor.ErrDType, "[]int64 receives an I64 tensor, not %v", src.DType)
		o.that(len(d) == n, tensor.ErrShape, "dst has room for %d values, src has %d elements", len(d), n)
		if o.failed() || n == 0 {
			return
		}
		host = unsafe.Pointer(&d[0])
	default:
		o.failf(tensor.ErrDType, "dst is %T; want []float32, []uint16, []int32 or []int64", dst)
		return
	}
	if o.fail(o.toHost(host, addr(src), src.Bytes())) != nil {
		return
	}
	if widenTo != nil {
		tensor.WidenHalf(widenTo, bits, src.DType)
	}
	runtime.KeepAlive(dst)
	return
}

// toHost copies bytes from device address p into host memory and waits for the stream (an earlier op's
// asynchronous failure is reported here): a host wait of op o, counted (HostWaits).
func (o *op) toHost(host unsafe.Pointer, p uint64, bytes int) error {
	b := o.b
	if err := o.syncCheck(); err != nil {
		return err
	}
	if err := cu.MemcpyDtoHAsync(host, cu.DevicePtr(p), int64(bytes), b.stream); err != nil {
		return driverErr("cuMemcpyDtoHAsync", err, "%d bytes", bytes)
	}
	return driverErr("cuStreamSynchronize", o.sync(), "waiting for a copy to the host (an earlier op may have failed; TUNE_CUDA_SYNC=1 names it)")
}

// Copy sets dst = src for tensors of one dtype and equal element count (shapes may differ). Overlapping views
// of one buffer are copied through a temporary.
func (b *Backend) Copy(dst, src *tensor.Tensor) (err error) {
	o := b.begin("Copy", dst, src)
	defer o.end(&err)
	o.tensor("dst", dst).tensor("src", src)
	if o.failed() {
		return
	}
	o.that(dst.DType == src.DType, tensor.ErrDType, "dst is %v, src is %v (use Cast to convert)", dst.DType, src.DType)
	o.numel("dst", dst, src.Numel())
	if o.failed() {
		return
	}
	o.copyBytes(addr(dst), addr(src), src.Bytes())
	return
}

// copyDD queues one device-to-device copy of n bytes.
func (o *op) copyDD(dst, src uint64, n int) error {
	return o.stream(func() []byte { return fmt.Appendf(nil, "dtod %x %x %d", dst, src, n) }, func() error {
		return driverErr("cuMemcpyDtoDAsync", cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), int64(n), o.b.stream), "%d bytes", n)
	})
}

// copyBytes queues a device-to-device copy; overlapping ranges go through a scratch buffer.
func (o *op) copyBytes(dst, src uint64, n int) {
	if o.err != nil || n == 0 || dst == src {
		return
	}
	if dst < src+uint64(n) && src < dst+uint64(n) {
		tmp := o.scratch(n)
		if o.err != nil {
			return
		}
		defer o.release(tmp)
		o.fail(o.copyDD(uint64(tmp), src, n))
		src = uint64(tmp)
	}
	if o.err == nil {
		o.fail(o.copyDD(dst, src, n))
	}
}

// Fill sets every element of x to v, rounded once to x's dtype (a memset of the rounded bits). For an integer
// x, v must be a whole number within the type's range (ErrArgument otherwise), so Fill(labels, -100) works.
func (b *Backend) Fill(x *tensor.Tensor, v float32) (err error) {
	o := b.begin("Fill", x)
	defer o.end(&err)
	o.tensor("x", x)
	if o.failed() {
		return
	}
	p, n := cu.DevicePtr(addr(x)), int64(x.Numel())
	if n == 0 && x.DType.IsFloat() {
		return
	}
	switch x.DType {
	case tensor.I32:
		o.that(v == float32(math.Trunc(float64(v))) && v >= math.MinInt32 && v <= math.MaxInt32, tensor.ErrArgument, "%v is not an int32 value", v)
	case tensor.I64:
		o.that(v == float32(math.Trunc(float64(v))) && v >= math.MinInt64 && v < math.MaxInt64, tensor.ErrArgument, "%v is not an int64 value", v)
	}
	if o.failed() || n == 0 {
		return
	}
	fill := func() error {
		var e error
		switch x.DType {
		case tensor.F32:
			e = cu.MemsetD32Async(p, uint(math.Float32bits(v)), n, b.stream)
		case tensor.F16:
			e = cu.MemsetD16Async(p, tensor.F32ToF16(v), n, b.stream)
		case tensor.BF16:
			e = cu.MemsetD16Async(p, tensor.F32ToBF16(v), n, b.stream)
		case tensor.I32:
			e = cu.MemsetD32Async(p, uint(uint32(int32(v))), n, b.stream)
		case tensor.I64:
			w := uint64(int64(v))
			// Two strided 32-bit memsets: the low words at p, p+8, ... and the high words at p+4, p+12, ...
			e = cu.MemsetD2D32Async(p, 8, uint(uint32(w)), 1, n, b.stream)
			if e == nil {
				e = cu.MemsetD2D32Async(p+4, 8, uint(uint32(w>>32)), 1, n, b.stream)
			}
		}
		return driverErr("cuMemsetAsync", e, "filling %v with %v", x, v)
	}
	o.fail(o.stream(func() []byte { return fmt.Appendf(nil, "fill %x %d %d %x", p, n, x.DType, math.Float32bits(v)) }, fill))
	return
}

// Cast sets dst = src converted to dst's dtype, for float tensors of equal element count: widening is exact,
// narrowing rounds to nearest even (F16↔BF16 goes through the exact FP32 value, so it rounds once).
func (b *Backend) Cast(dst, src *tensor.Tensor) (err error) {
	o := b.begin("Cast", dst, src)
	defer o.end(&err)
	o.float("dst", dst).float("src", src)
	if o.failed() {
		return
	}
	o.numel("dst", dst, src.Numel())
	if o.failed() {
		return
	}
	if dst.DType == src.DType {
		o.copyBytes(addr(dst), addr(src), src.Bytes())
		return
	}
	n := src.Numel()
	o.ew("elementwise.cu", "cast", n, addr(dst), dt(dst), addr(src), dt(src), i64(n), o.ewVec(dst, src))
	return
}
