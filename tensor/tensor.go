package tensor

import (
	"fmt"
	"strings"
)

// Shape is a tensor's extent per axis, outermost first (row-major, C order).
type Shape []int

// Numel returns the number of elements (1 for a 0-dim shape).
func (s Shape) Numel() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Equal reports whether s and o have the same rank and extents.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// String formats s as "[2 3 4]".
func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// Buffer is a backend-owned allocation. Only the backend that made it reads its contents; the tensor package
// sees it as an opaque handle with a length in elements.
type Buffer interface {
	// Len returns the buffer's capacity in elements of its dtype.
	Len() int
}

// Tensor is a dense row-major view into a Buffer: Shape.Numel() elements of type DType starting Offset elements
// into Buf. Several tensors may view one buffer (a flat parameter buffer, a step arena); ops never check for
// overlap between their arguments.
type Tensor struct {
	Shape  Shape  // extents, outermost first; the view holds Shape.Numel() elements
	DType  DType  // element type of Buf, shared by every tensor viewing it
	Buf    Buffer // the backend allocation the view reads; nil for an unallocated tensor
	Offset int    // index of the view's first element in Buf, in elements of DType
}

// Numel returns the number of elements the tensor views.
func (t *Tensor) Numel() int { return t.Shape.Numel() }

// Bytes returns the size of the viewed data in bytes.
func (t *Tensor) Bytes() int { return t.Numel() * t.DType.Size() }

// String describes the tensor as "F32[2 3]".
func (t *Tensor) String() string {
	if t == nil {
		return "<nil>"
	}
	return t.DType.String() + t.Shape.String()
}

// View returns a tensor of the given shape viewing t's buffer from element offset off (relative to t's own
// offset). It errors with ErrShape if the view would run past the end of t.
func (t *Tensor) View(off int, shape ...int) (*Tensor, error) {
	s := Shape(append([]int(nil), shape...))
	if off < 0 || off+s.Numel() > t.Numel() {
		return nil, &OpError{Op: "View", Shapes: []Shape{t.Shape, s}, Err: fmt.Errorf("%w: offset %d + %d elements exceeds %d", ErrShape, off, s.Numel(), t.Numel())}
	}
	return &Tensor{Shape: s, DType: t.DType, Buf: t.Buf, Offset: t.Offset + off}, nil
}

// Reshape returns a view of t with a new shape of the same number of elements.
func (t *Tensor) Reshape(shape ...int) (*Tensor, error) {
	if Shape(shape).Numel() != t.Numel() {
		return nil, &OpError{Op: "Reshape", Shapes: []Shape{t.Shape, shape}, Err: fmt.Errorf("%w: %d elements cannot be viewed as %v", ErrShape, t.Numel(), Shape(shape))}
	}
	return t.View(0, shape...)
}
