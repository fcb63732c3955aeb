package tensor

import (
	"errors"
	"strings"
)

// Sentinel errors that callers branch on with errors.Is.
var (
	// ErrShape: an argument's shape does not fit the op.
	ErrShape = errors.New("shape mismatch")
	// ErrDType: an argument's dtype is not one the op accepts.
	ErrDType = errors.New("unsupported dtype")
	// ErrBackend: a tensor belongs to another backend.
	ErrBackend = errors.New("tensor from another backend")
	// ErrArgument: a scalar argument is out of range (negative size, p outside [0,1), ...).
	ErrArgument = errors.New("invalid argument")
	// ErrUnsupported: a backend's kernel does not cover these (valid) arguments, e.g. a head size outside the
	// fused attention kernel's; the message names what is supported, and callers may take another path.
	ErrUnsupported = errors.New("not supported by this backend")
	// ErrNoDevice: the backend is not available (e.g. a binary built without CUDA support, or no GPU).
	ErrNoDevice = errors.New("device not available")
)

// OpError is the error every Backend op returns: the op's name, the shapes of its arguments in signature order,
// and the cause (wrapping one of the sentinels above).
type OpError struct {
	Op     string  // the Backend method's name: "Gemm", "LayerNormBackward"
	Shapes []Shape // the shapes of its tensor arguments, in signature order (nil entries for nil tensors)
	Err    error   // the cause, wrapping ErrShape, ErrDType, ErrBackend, ErrArgument, ErrUnsupported or a backend's own error
}

// Error formats as "tensor: Gemm [2 3] [4 5]: shape mismatch: ...".
func (e *OpError) Error() string {
	var b strings.Builder
	b.WriteString("tensor: ")
	b.WriteString(e.Op)
	for _, s := range e.Shapes {
		b.WriteByte(' ')
		b.WriteString(s.String())
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// Errorf builds an *OpError for op with the shapes of ts (nil tensors shown as []).
func Errorf(op string, cause error, ts ...*Tensor) *OpError {
	shapes := make([]Shape, len(ts))
	for i, t := range ts {
		if t != nil {
			shapes[i] = t.Shape
		}
	}
	return &OpError{Op: op, Shapes: shapes, Err: cause}
}
