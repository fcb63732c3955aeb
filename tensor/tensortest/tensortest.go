package tensortest

import (
	"errors"
	"testing"

	_ "github.com/tune-ml/tune/cuda" // registers "cuda" when built with -tags cuda
	"github.com/tune-ml/tune/tensor"
	_ "github.com/tune-ml/tune/tensor/cpu" // registers "cpu"
)

// ForEachBackend runs fn as a subtest named after each registered backend. A backend that is compiled in but has
// no device is skipped with the reason.
func ForEachBackend(t *testing.T, fn func(t *testing.T, b tensor.Backend)) {
	t.Helper()
	for _, f := range tensor.Backends() {
		t.Run(f.Name, func(t *testing.T) {
			b, err := f.Open()
			if errors.Is(err, tensor.ErrNoDevice) {
				t.Skipf("backend %s: %v", f.Name, err)
			}
			if err != nil {
				t.Fatalf("open backend %s: %v", f.Name, err)
			}
			fn(t, b)
		})
	}
}
