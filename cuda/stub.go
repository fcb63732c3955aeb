//go:build !cuda

package cuda

import (
	"fmt"
	"io"

	"github.com/tune-ml/tune/tensor"
)

// Available reports whether this binary was built with CUDA support and a device can be opened.
func Available() bool { return false }

// Open returns the CUDA backend for device ordinal. This binary was built without the cuda tag, so it always
// fails with an error wrapping tensor.ErrNoDevice.
func Open(ordinal int) (tensor.Backend, error) {
	return nil, fmt.Errorf("cuda: this binary was built without CUDA support (rebuild with `make cuda`, i.e. go build -tags cuda): %w", tensor.ErrNoDevice)
}

// Probe lists the CUDA devices and the libraries loaded to reach them. Without CUDA support it returns an error
// wrapping tensor.ErrNoDevice.
func Probe() ([]DeviceInfo, error) {
	_, err := Open(0)
	return nil, err
}

// SetAllowTF32 lets FP32 GEMMs of a CUDA backend use TF32; this binary has no CUDA backend, so it always
// fails.
func SetAllowTF32(b tensor.Backend, allow bool) error {
	return fmt.Errorf("cuda: SetAllowTF32 needs a CUDA backend, got %s (this binary was built without CUDA support)", b.Name())
}

// Memory returns a CUDA backend's allocator counters; without CUDA support there is none, so it reports false.
func Memory(b tensor.Backend) (MemoryStats, bool) { return MemoryStats{}, false }

// StepGraph is the CUDA graph of a training step (a CUDA build only).
type StepGraph struct {
	// Verify is the CUDA build's checked replays after each capture (unused here).
	Verify int
}

// SetPhiloxBase does nothing: without CUDA every dropout offset is absolute.
func (g *StepGraph) SetPhiloxBase(base uint64) error { return nil }

// NewStepGraph fails: this binary was built without CUDA.
func NewStepGraph(b tensor.Backend, warmup int) (*StepGraph, error) {
	return nil, fmt.Errorf("cuda: CUDA graphs need a CUDA build (go build -tags cuda): %w", tensor.ErrNoDevice)
}

// Run runs fn.
func (g *StepGraph) Run(fn func() error) error { return fn() }

// Stats reports nothing.
func (g *StepGraph) Stats() GraphStats { return GraphStats{Off: "not a CUDA build"} }

// Close does nothing.
func (g *StepGraph) Close() {}

// SurveyGemms times the cuBLASLt algorithms of a CUDA backend's GEMMs; this binary has no CUDA backend.
func SurveyGemms(b tensor.Backend, w io.Writer, opt GemmSurveyOptions) error {
	return fmt.Errorf("cuda: SurveyGemms needs a CUDA backend, got %s (this binary was built without CUDA support)", b.Name())
}
