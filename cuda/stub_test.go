//go:build !cuda

package cuda_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tune-ml/tune/cuda"
	"github.com/tune-ml/tune/tensor"
)

// TestStubSaysBuiltWithoutCUDA checks the untagged build: every entry point fails with an error wrapping
// tensor.ErrNoDevice that tells the user how to get CUDA support.
func TestStubSaysBuiltWithoutCUDA(t *testing.T) {
	if cuda.Available() {
		t.Error("Available() is true in a build without CUDA support")
	}
	_, err := cuda.Open(0)
	if !errors.Is(err, tensor.ErrNoDevice) || !strings.Contains(err.Error(), "-tags cuda") {
		t.Errorf("Open: err = %v; want ErrNoDevice with a hint to build with -tags cuda", err)
	}
	if _, err := cuda.Probe(); !errors.Is(err, tensor.ErrNoDevice) {
		t.Errorf("Probe: err = %v; want ErrNoDevice", err)
	}
}
