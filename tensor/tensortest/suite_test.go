package tensortest

import (
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// TestOpSuite runs the shared op suite on every compiled backend: the CPU reference always, and the CUDA
// backend in a -tags cuda build on a machine with a GPU.
func TestOpSuite(t *testing.T) { ForEachBackend(t, RunOpSuite) }

// TestOpSuiteUnderPhiloxBase runs the op suite again on each backend that counts its dropout draws from a
// settable Philox base (the CUDA backend: cuda/philox.go), with a base far from 0: every dropout op must draw
// the masks of its absolute offsets, as without one.
func TestOpSuiteUnderPhiloxBase(t *testing.T) {
	ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		pb, ok := b.(interface{ SetPhiloxBase(uint64) error })
		if !ok {
			t.Skipf("backend %s has no Philox base", b.Name())
		}
		if err := pb.SetPhiloxBase(0x9e3779b97f4a7c15); err != nil {
			t.Fatal(err)
		}
		defer pb.SetPhiloxBase(0)
		RunOpSuite(t, b)
	})
}
