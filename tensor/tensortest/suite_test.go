package tensortest

import "testing"

// TestOpSuite runs the shared op suite on every compiled backend: the CPU reference always, and the CUDA
// backend in a -tags cuda build on a machine with a GPU.
func TestOpSuite(t *testing.T) { ForEachBackend(t, RunOpSuite) }
