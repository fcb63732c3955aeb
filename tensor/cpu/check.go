package cpu

import (
	"fmt"
	"strings"

	"github.com/tune-ml/tune/tensor"
)

// check validates an op's arguments. Its methods chain and keep the first failure, so an op reads as a list of
// requirements followed by one `if err := c.Err(); err != nil`. Every failure is a *tensor.OpError naming the
// op and the shapes of all its tensor arguments.
type check struct {
	op   string
	args []*tensor.Tensor
	err  error
}

func newCheck(op string, args ...*tensor.Tensor) *check { return &check{op: op, args: args} }

// Err returns the first failure, or nil.
func (c *check) Err() error { return c.err }

// fail records sentinel with a message unless a failure is already recorded.
func (c *check) fail(sentinel error, format string, a ...any) *check {
	if c.err == nil {
		c.err = tensor.Errorf(c.op, fmt.Errorf("%w: "+format, append([]any{sentinel}, a...)...), c.args...)
	}
	return c
}

// that records a failure when ok is false.
func (c *check) that(ok bool, sentinel error, format string, a ...any) *check {
	if !ok {
		c.fail(sentinel, format, a...)
	}
	return c
}

var floatTypes = []tensor.DType{tensor.F32, tensor.F16, tensor.BF16}

// tensor requires t to be a live view of a CPU buffer whose dtype is one of dts.
func (c *check) tensor(name string, t *tensor.Tensor, dts ...tensor.DType) *check {
	if c.err != nil {
		return c
	}
	if t == nil {
		return c.fail(tensor.ErrArgument, "%s is nil", name)
	}
	if t.Buf == nil {
		return c.fail(tensor.ErrArgument, "%s %v has no buffer (allocate it with Alloc)", name, t)
	}
	bf, ok := t.Buf.(*buffer)
	if !ok {
		return c.fail(tensor.ErrBackend, "%s %v holds a %T, not a cpu buffer (upload it to the cpu backend)", name, t, t.Buf)
	}
	if bf.freed {
		return c.fail(tensor.ErrArgument, "%s %v uses a buffer that was freed", name, t)
	}
	if t.DType != bf.dt {
		return c.fail(tensor.ErrDType, "%s claims dtype %v but its buffer holds %v", name, t.DType, bf.dt)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return c.fail(tensor.ErrShape, "%s has a negative extent in shape %v", name, t.Shape)
		}
	}
	if t.Offset < 0 || t.Offset+t.Numel() > bf.n {
		return c.fail(tensor.ErrShape, "%s views elements [%d, %d) of a %d-element buffer", name, t.Offset, t.Offset+t.Numel(), bf.n)
	}
	if len(dts) > 0 && !hasDType(dts, t.DType) {
		return c.fail(tensor.ErrDType, "%s is %v, want %s", name, t.DType, dtypeList(dts))
	}
	return c
}

// float requires a float tensor (F32, F16 or BF16).
func (c *check) float(name string, t *tensor.Tensor) *check { return c.tensor(name, t, floatTypes...) }

// f32 requires an F32 tensor.
func (c *check) f32(name string, t *tensor.Tensor) *check { return c.tensor(name, t, tensor.F32) }

// index requires an integer tensor (I32 or I64).
func (c *check) index(name string, t *tensor.Tensor) *check {
	return c.tensor(name, t, tensor.I32, tensor.I64)
}

// numel requires t (already checked) to hold n elements.
func (c *check) numel(name string, t *tensor.Tensor, n int) *check {
	if c.err != nil {
		return c
	}
	return c.that(t.Numel() == n, tensor.ErrShape, "%s has %d elements, want %d", name, t.Numel(), n)
}

// rows requires t (already checked) to have rank ≥ 1 and returns its row count and last-axis extent.
func (c *check) rows(name string, t *tensor.Tensor) (n, ch int) {
	if c.err != nil {
		return 0, 0
	}
	if len(t.Shape) == 0 {
		c.fail(tensor.ErrShape, "%s is a scalar; want at least one axis (…, C)", name)
		return 0, 0
	}
	ch = t.Shape[len(t.Shape)-1]
	if ch == 0 {
		return 0, 0
	}
	return t.Numel() / ch, ch
}

func hasDType(dts []tensor.DType, d tensor.DType) bool {
	for _, x := range dts {
		if x == d {
			return true
		}
	}
	return false
}

func dtypeList(dts []tensor.DType) string {
	s := make([]string, len(dts))
	for i, d := range dts {
		s[i] = d.String()
	}
	return strings.Join(s, " or ")
}

// guard turns a panic inside an op into an error (a bug in this package; no panic crosses the package
// boundary). Use as `defer guard(&err, op, args...)`.
func guard(err *error, op string, args ...*tensor.Tensor) {
	if r := recover(); r != nil {
		*err = tensor.Errorf(op, fmt.Errorf("cpu: internal error, please report it: %v", r), args...)
	}
}
