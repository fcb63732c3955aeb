package cpu

import "github.com/tune-ml/tune/tensor"

// buffer is the CPU backend's tensor.Buffer: one typed slice (the one matching dt) and the tensor Alloc
// returned for it, which is the only tensor Free acts on.
type buffer struct {
	dt    tensor.DType
	n     int
	f32   []float32 // F32
	u16   []uint16  // F16, BF16 bits
	i32   []int32   // I32
	i64   []int64   // I64
	owner *tensor.Tensor
	freed bool
}

// Len returns the buffer's capacity in elements (0 after Free).
func (bf *buffer) Len() int {
	if bf.freed {
		return 0
	}
	return bf.n
}

func newBuffer(dt tensor.DType, n int) *buffer {
	bf := &buffer{dt: dt, n: n}
	switch dt {
	case tensor.F32:
		bf.f32 = make([]float32, n)
	case tensor.F16, tensor.BF16:
		bf.u16 = make([]uint16, n)
	case tensor.I32:
		bf.i32 = make([]int32, n)
	case tensor.I64:
		bf.i64 = make([]int64, n)
	}
	return bf
}

// The typed views below assume t passed validation (see check.go).

func bufOf(t *tensor.Tensor) *buffer { return t.Buf.(*buffer) }

func f32Of(t *tensor.Tensor) []float32 {
	return bufOf(t).f32[t.Offset : t.Offset+t.Numel()]
}

func u16Of(t *tensor.Tensor) []uint16 {
	return bufOf(t).u16[t.Offset : t.Offset+t.Numel()]
}

func i32Of(t *tensor.Tensor) []int32 {
	return bufOf(t).i32[t.Offset : t.Offset+t.Numel()]
}

func i64Of(t *tensor.Tensor) []int64 {
	return bufOf(t).i64[t.Offset : t.Offset+t.Numel()]
}

// load returns t's values in FP32: F32 storage itself (callers must not write it) or an exact widening of
// F16/BF16 storage into a new slice.
func load(t *tensor.Tensor) []float32 {
	if t.DType == tensor.F32 {
		return f32Of(t)
	}
	out := make([]float32, t.Numel())
	tensor.WidenHalf(out, u16Of(t), t.DType)
	return out
}

// output is a float tensor written in FP32: V is its storage for F32, or a scratch slice that Store rounds
// into the half storage.
type output struct {
	t *tensor.Tensor
	V []float32
}

// overwrite prepares t to be overwritten (=): for half dtypes V starts zeroed and is not read from t.
func overwrite(t *tensor.Tensor) output {
	if t.DType == tensor.F32 {
		return output{t, f32Of(t)}
	}
	return output{t, make([]float32, t.Numel())}
}

// accumulate prepares t to be accumulated into (+=) or updated in place: V starts with t's values in FP32.
func accumulate(t *tensor.Tensor) output {
	if t.DType == tensor.F32 {
		return output{t, f32Of(t)}
	}
	return output{t, load(t)}
}

// Store rounds V into t's storage once (nothing to do for F32, whose V is the storage).
func (o output) Store() {
	if o.t.DType != tensor.F32 {
		tensor.NarrowHalf(u16Of(o.t), o.V, o.t.DType)
	}
}
