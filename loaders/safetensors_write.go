package loaders

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"unsafe"

	"github.com/nlpodyssey/safetensors"

	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/tensor"
)

// ErrSharedMemory: WriteSafetensors was asked to store two tensors whose Data overlap in memory.
var ErrSharedMemory = errors.New("some tensors share memory")

// WriteSafetensors writes tensors to path in the safetensors format with nlpodyssey/safetensors' serializer, which
// lays the file out as the reference writer does: the header JSON padded with spaces to a multiple of 8 bytes, and
// the tensors packed back to back sorted by dtype (widest first: I64, F32, I32, BF16, F16) then by name, so each is
// naturally aligned.
//
// metadata becomes the header's "__metadata__". nil writes {"format":"pt"}, which transformers requires to load a
// model.safetensors; an empty, non-nil map writes no "__metadata__".
//
// Each tensor must be F32, F16, BF16, I32 or I64 with len(Data) matching its shape; names must be unique and not
// "__metadata__". Two tensors whose Data share memory (the same slice or partly overlapping views, e.g. tied
// weights) are refused with ErrSharedMemory, as the reference refuses them: store a tied tensor once, under one
// name, as transformers' save_pretrained does.
//
// The file is written to a temporary file in the same directory, synced and renamed over path, so a reader never
// sees a half-written file and a failure leaves any previous file untouched.
func WriteSafetensors(path string, tensors []HostTensor, metadata map[string]string) (err error) {
	views := make(map[string]hostView, len(tensors))
	for _, t := range tensors {
		if t.Name == "" || t.Name == "__metadata__" {
			return fmt.Errorf("loaders: WriteSafetensors %s: invalid tensor name %q", path, t.Name)
		}
		if _, dup := views[t.Name]; dup {
			return fmt.Errorf("loaders: WriteSafetensors %s: tensor %q given twice", path, t.Name)
		}
		if err := t.check(); err != nil {
			return fmt.Errorf("loaders: WriteSafetensors %s: %w", path, err)
		}
		v, err := newHostView(t)
		if err != nil {
			return fmt.Errorf("loaders: WriteSafetensors %s: %w", path, err)
		}
		views[t.Name] = v
	}
	if err := checkNoSharedMemory(tensors); err != nil {
		return fmt.Errorf("loaders: WriteSafetensors %s: %w", path, err)
	}
	if metadata == nil {
		metadata = map[string]string{"format": "pt"}
	}
	err = atomicfile.Write(path, 0o644, func(w io.Writer) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("nlpodyssey/safetensors panicked: %v", r)
			}
		}()
		return safetensors.SerializeToWriter(views, metadata, w)
	})
	if err != nil {
		return fmt.Errorf("loaders: %w", err)
	}
	return nil
}

// hostView adapts a HostTensor to safetensors.View.
type hostView struct {
	dtype safetensors.DType
	shape []uint64
	data  []byte
}

func (v hostView) DType() safetensors.DType { return v.dtype }
func (v hostView) Shape() []uint64          { return v.shape }
func (v hostView) Data() []byte             { return v.data }
func (v hostView) DataLen() uint64          { return uint64(len(v.data)) }

var _ safetensors.View = hostView{}

// libDTypes maps tune's dtypes to nlpodyssey/safetensors'.
var libDTypes = map[tensor.DType]safetensors.DType{
	tensor.F32: safetensors.F32, tensor.F16: safetensors.F16, tensor.BF16: safetensors.BF16,
	tensor.I32: safetensors.I32, tensor.I64: safetensors.I64,
}

func newHostView(t HostTensor) (hostView, error) {
	dt, ok := libDTypes[t.DType]
	if !ok {
		return hostView{}, fmt.Errorf("tensor %q: %w %v (tune writes F32, F16, BF16, I32, I64)", t.Name, ErrUnsupportedDType, t.DType)
	}
	shape := make([]uint64, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = uint64(d)
	}
	return hostView{dtype: dt, shape: shape, data: t.Data}, nil
}

// checkNoSharedMemory fails when the Data of two non-empty tensors overlap in memory.
func checkNoSharedMemory(tensors []HostTensor) error {
	type span struct {
		lo, hi uintptr
		name   string
	}
	spans := make([]span, 0, len(tensors))
	for _, t := range tensors {
		if len(t.Data) == 0 {
			continue
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(t.Data)))
		spans = append(spans, span{lo, lo + uintptr(len(t.Data)), t.Name})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	for i := 1; i < len(spans); i++ {
		if a, b := spans[i-1], spans[i]; b.lo < a.hi {
			return fmt.Errorf("%w: %q and %q; a tensor may be stored only once: drop the tied or aliased name (as save_pretrained does) or clone the data", ErrSharedMemory, a.name, b.name)
		}
	}
	return nil
}
