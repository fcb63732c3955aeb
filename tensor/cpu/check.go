package cpu

import (
	"fmt"

	"github.com/tune-ml/tune/internal/opcheck"
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

// record records err (a failure from opcheck, wrapped as a *tensor.OpError) unless it is nil or a failure is
// already recorded.
func (c *check) record(err error) *check {
	if err != nil && c.err == nil {
		c.err = tensor.Errorf(c.op, err, c.args...)
	}
	return c
}

// fail records sentinel with a message unless a failure is already recorded.
func (c *check) fail(sentinel error, format string, a ...any) *check {
	return c.record(opcheck.Errorf(sentinel, format, a...))
}

// that records a failure when ok is false.
func (c *check) that(ok bool, sentinel error, format string, a ...any) *check {
	if !ok {
		c.fail(sentinel, format, a...)
	}
	return c
}

// cpuOwner tells opcheck.View which buffers are this backend's.
var cpuOwner = opcheck.Owner{
	Buffer: func(b tensor.Buffer) (opcheck.Buffer, bool) {
		bf, ok := b.(*buffer)
		if !ok {
			return opcheck.Buffer{}, false
		}
		return opcheck.Buffer{DType: bf.dt, Len: bf.n, Freed: bf.freed}, true
	},
	Foreign: "a cpu buffer (upload it to the cpu backend)",
}

// tensor requires t to be a live view of a CPU buffer whose dtype is one of dts (opcheck.View).
func (c *check) tensor(name string, t *tensor.Tensor, dts ...tensor.DType) *check {
	if c.err != nil {
		return c
	}
	return c.record(opcheck.View(name, t, cpuOwner, dts...))
}

// float requires a float tensor (F32, F16 or BF16).
func (c *check) float(name string, t *tensor.Tensor) *check {
	return c.tensor(name, t, opcheck.Floats...)
}

// f32 requires an F32 tensor.
func (c *check) f32(name string, t *tensor.Tensor) *check { return c.tensor(name, t, tensor.F32) }

// index requires an integer tensor (I32 or I64).
func (c *check) index(name string, t *tensor.Tensor) *check {
	return c.tensor(name, t, opcheck.Indices...)
}

// numel requires t (already checked) to hold n elements.
func (c *check) numel(name string, t *tensor.Tensor, n int) *check {
	if c.err != nil {
		return c
	}
	return c.record(opcheck.Numel(name, t, n))
}

// rows requires t (already checked) to have rank ≥ 1 and returns its row count and last-axis extent.
func (c *check) rows(name string, t *tensor.Tensor) (n, ch int) {
	if c.err != nil {
		return 0, 0
	}
	n, ch, err := opcheck.Rows(name, t)
	c.record(err)
	return n, ch
}

// guard turns a panic inside an op into an error (a bug in this package; no panic crosses the package
// boundary). Use as `defer guard(&err, op, args...)`.
func guard(err *error, op string, args ...*tensor.Tensor) {
	if r := recover(); r != nil {
		*err = tensor.Errorf(op, fmt.Errorf("cpu: internal error, please report it: %v", r), args...)
	}
}
