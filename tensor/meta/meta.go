package meta

import (
	"errors"
	"fmt"
	"sync"

	"github.com/tune-ml/tune/tensor"
)

// ErrMeta is what the ops that would compute a value return: a meta tensor has no values.
var ErrMeta = errors.New("meta backend: tensors have no values (the backend only counts memory)")

// Backend is the meta backend. Its zero value is not usable; New returns one.
//
// The ops models call while building (Alloc, Free, Upload, Fill, Copy, Cast, Scale) and Synchronize succeed
// without touching memory; Download and every compute op return ErrMeta. A Backend is safe for use by
// several goroutines.
type Backend struct {
	// refusing stands in for every op not written out below: each returns ErrMeta.
	refusing

	target      tensor.Backend
	mu          sync.Mutex
	live        map[*buffer]int64
	bytes, peak int64
}

var _ tensor.Backend = (*Backend)(nil)

// buffer is a meta tensor's Buffer: a length and no storage.
type buffer struct{ n int }

// Len returns the buffer's length in elements.
func (b *buffer) Len() int { return b.n }

// New returns a meta backend standing in for target (nil for none): Name reports target's name with a "meta:"
// prefix and Target returns it, for the few decisions a plan must take as target would (which attention
// kernel covers a shape).
func New(target tensor.Backend) *Backend {
	return &Backend{target: target, live: map[*buffer]int64{}}
}

// Name returns "meta", or "meta:" and the target's name.
func (b *Backend) Name() string {
	if b.target == nil {
		return "meta"
	}
	return "meta:" + b.target.Name()
}

// Target returns the backend b stands in for (nil for none).
func (b *Backend) Target() tensor.Backend { return b.target }

// Meta marks b as a meta backend (tensor.IsMeta).
func (b *Backend) Meta() {}

// Bytes returns the bytes of the live tensors allocated on b.
func (b *Backend) Bytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes
}

// Peak returns the most Bytes has been since New.
func (b *Backend) Peak() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// Alloc returns a tensor of dt and shape with a buffer of no storage, and counts its bytes.
func (b *Backend) Alloc(dt tensor.DType, shape ...int) (*tensor.Tensor, error) {
	s := tensor.Shape(append([]int(nil), shape...))
	for _, d := range s {
		if d < 0 {
			return nil, &tensor.OpError{Op: "Alloc", Shapes: []tensor.Shape{s}, Err: fmt.Errorf("%w: negative extent", tensor.ErrShape)}
		}
	}
	if dt.Size() == 0 {
		return nil, &tensor.OpError{Op: "Alloc", Shapes: []tensor.Shape{s}, Err: fmt.Errorf("%w: %v", tensor.ErrDType, dt)}
	}
	buf := &buffer{n: s.Numel()}
	n := int64(buf.n) * int64(dt.Size())
	b.mu.Lock()
	defer b.mu.Unlock()
	b.live[buf] = n
	b.bytes += n
	b.peak = max(b.peak, b.bytes)
	return &tensor.Tensor{Shape: s, DType: dt, Buf: buf}, nil
}

// Free uncounts t's buffer when t is a tensor Alloc returned (for a view, or a tensor of another backend:
// nothing).
func (b *Backend) Free(t *tensor.Tensor) {
	if t == nil || t.Offset != 0 {
		return
	}
	buf, ok := t.Buf.(*buffer)
	if !ok || buf.n != t.Numel() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n, ok := b.live[buf]; ok {
		b.bytes -= n
		delete(b.live, buf)
	}
}

// check returns an OpError unless every tensor is a meta tensor (or nil).
func check(op string, ts ...*tensor.Tensor) error {
	for _, t := range ts {
		if t == nil {
			continue
		}
		if _, ok := t.Buf.(*buffer); !ok {
			return &tensor.OpError{Op: op, Err: fmt.Errorf("%w: %v is not a meta tensor", tensor.ErrArgument, t)}
		}
	}
	return nil
}

// Upload does nothing (the values are not kept) once dst is a meta tensor.
func (b *Backend) Upload(dst *tensor.Tensor, src any) error { return check("Upload", dst) }

// Fill does nothing.
func (b *Backend) Fill(x *tensor.Tensor, v float32) error { return check("Fill", x) }

// Copy does nothing.
func (b *Backend) Copy(dst, src *tensor.Tensor) error { return check("Copy", dst, src) }

// Cast does nothing.
func (b *Backend) Cast(dst, src *tensor.Tensor) error { return check("Cast", dst, src) }

// Scale does nothing.
func (b *Backend) Scale(x *tensor.Tensor, alpha float32) error { return check("Scale", x) }

// Synchronize returns nil: nothing is ever queued.
func (b *Backend) Synchronize() error { return nil }

// Download returns ErrMeta: there are no values to read.
func (b *Backend) Download(dst any, src *tensor.Tensor) error {
	return &tensor.OpError{Op: "Download", Err: ErrMeta}
}
