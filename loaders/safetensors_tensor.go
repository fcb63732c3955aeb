package loaders

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tune-ml/tune/tensor"
)

// HostTensor is a tensor in host memory in safetensors layout: C order, little-endian elements of DType.
//
// A HostTensor returned by Checkpoint.Get is a zero-copy view of the (memory-mapped) file: Data is read-only and
// valid until the Checkpoint is closed. Convert it with Float32 or Float32Into, which copy.
type HostTensor struct {
	Name  string       // the key in the checkpoint
	DType tensor.DType // the stored element type: F32, F16, BF16, or I32/I64 (read those with Int64)
	Shape []int        // as stored, outermost first (C order)
	Data  []byte       // len = NumElements()·DType.Size()
}

// NumElements returns the product of Shape (1 for a 0-dim tensor, 0 when any dimension is 0).
func (t HostTensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		if d == 0 {
			return 0
		}
		n *= d
	}
	return n
}

// check verifies that Data holds exactly NumElements() elements of DType.
func (t HostTensor) check() error {
	size := t.DType.Size()
	if size == 0 {
		return fmt.Errorf("loaders: tensor %q: %w %v", t.Name, ErrUnsupportedDType, t.DType)
	}
	for i, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("loaders: tensor %q: shape %v has the negative dimension %d at %d", t.Name, t.Shape, d, i)
		}
	}
	if want := t.NumElements() * size; len(t.Data) != want {
		return fmt.Errorf("loaders: tensor %q: %v %v needs %d bytes but Data has %d", t.Name, t.DType, t.Shape, want, len(t.Data))
	}
	return nil
}

// Float32 returns the elements widened to float32 in a new slice: F32 is copied, F16 and BF16 are widened exactly
// (tensor.F16ToF32, tensor.BF16ToF32). Integer tensors give an error wrapping tensor.ErrDType.
func (t HostTensor) Float32() ([]float32, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	dst := make([]float32, t.NumElements())
	return dst, t.Float32Into(dst)
}

// Float32Into widens the elements into dst, which must have exactly NumElements() elements, so a caller can fill
// its own parameter buffer without an intermediate copy. Dtypes and errors as Float32.
func (t HostTensor) Float32Into(dst []float32) error {
	if err := t.check(); err != nil {
		return err
	}
	if len(dst) != t.NumElements() {
		return fmt.Errorf("loaders: tensor %q %v: destination has %d elements, want %d: %w", t.Name, t.Shape, len(dst), t.NumElements(), tensor.ErrShape)
	}
	src := t.Data
	switch t.DType {
	case tensor.F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case tensor.F16:
		for i := range dst {
			dst[i] = tensor.F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case tensor.BF16:
		for i := range dst {
			dst[i] = tensor.BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	default:
		return fmt.Errorf("loaders: tensor %q is %v, not a floating-point tensor (F32, F16 or BF16): %w", t.Name, t.DType, tensor.ErrDType)
	}
	return nil
}

// Int64 returns the elements of an I64 or I32 tensor as int64 in a new slice (buffers such as position_ids).
// Floating-point tensors give an error wrapping tensor.ErrDType.
func (t HostTensor) Int64() ([]int64, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	dst := make([]int64, t.NumElements())
	switch t.DType {
	case tensor.I64:
		for i := range dst {
			dst[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
		}
	case tensor.I32:
		for i := range dst {
			dst[i] = int64(int32(binary.LittleEndian.Uint32(t.Data[4*i:])))
		}
	default:
		return nil, fmt.Errorf("loaders: tensor %q is %v, not an integer tensor; read it with Float32: %w", t.Name, t.DType, tensor.ErrDType)
	}
	return dst, nil
}

// NewHostTensor encodes values into a new HostTensor of dtype F32, F16 or BF16 (rounding to nearest even, as
// tensor.F32ToF16 and tensor.F32ToBF16). len(values) must equal the product of shape.
func NewHostTensor(name string, dtype tensor.DType, shape []int, values []float32) (HostTensor, error) {
	t := HostTensor{Name: name, DType: dtype, Shape: append([]int(nil), shape...)}
	if !dtype.IsFloat() {
		return t, fmt.Errorf("loaders: NewHostTensor %q: dtype %v is not F32, F16 or BF16: %w", name, dtype, tensor.ErrDType)
	}
	if n := t.NumElements(); n != len(values) {
		return t, fmt.Errorf("loaders: NewHostTensor %q: shape %v holds %d elements, got %d values: %w", name, shape, n, len(values), tensor.ErrShape)
	}
	t.Data = make([]byte, len(values)*dtype.Size())
	for i, v := range values {
		switch dtype {
		case tensor.F32:
			binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(v))
		case tensor.F16:
			binary.LittleEndian.PutUint16(t.Data[2*i:], tensor.F32ToF16(v))
		case tensor.BF16:
			binary.LittleEndian.PutUint16(t.Data[2*i:], tensor.F32ToBF16(v))
		}
	}
	return t, nil
}

// NewHostTensorInt64 encodes values into a new I64 HostTensor; len(values) must equal the product of shape.
func NewHostTensorInt64(name string, shape []int, values []int64) (HostTensor, error) {
	t := HostTensor{Name: name, DType: tensor.I64, Shape: append([]int(nil), shape...)}
	if n := t.NumElements(); n != len(values) {
		return t, fmt.Errorf("loaders: NewHostTensorInt64 %q: shape %v holds %d elements, got %d values: %w", name, shape, n, len(values), tensor.ErrShape)
	}
	t.Data = make([]byte, 8*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint64(t.Data[8*i:], uint64(v))
	}
	return t, nil
}
