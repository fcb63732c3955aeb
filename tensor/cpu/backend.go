package cpu

import "github.com/tune-ml/tune/tensor"

// Backend is the CPU reference implementation of tensor.Backend. New returns one; the zero value works too.
// A Backend holds no mutable state, so one value may be shared by goroutines that work on disjoint tensors.
type Backend struct{}

var _ tensor.Backend = (*Backend)(nil)

func init() {
	tensor.RegisterBackend("cpu", func() (tensor.Backend, error) { return New(), nil })
}

// New returns the CPU backend. It never fails.
func New() *Backend { return &Backend{} }

// Name returns "cpu".
func (b *Backend) Name() string { return "cpu" }

// Synchronize returns nil at once: every CPU op has finished when it returns.
func (b *Backend) Synchronize() error { return nil }
