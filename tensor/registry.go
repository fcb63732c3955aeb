package tensor

import "sync"

// BackendFactory opens a compiled-in backend. Open returns an error wrapping ErrNoDevice when the backend is
// compiled in but has no device (a CUDA build on a machine without a GPU).
type BackendFactory struct {
	Name string                  // the name it registered under: "cpu", "cuda"
	Open func() (Backend, error) // opens a new instance of the backend (device 0 for cuda)
}

var (
	registryMu sync.Mutex
	registry   []BackendFactory
)

// RegisterBackend makes a backend known to Backends; backend packages call it from init (as database/sql
// drivers do). The CPU backend registers as "cpu", the CUDA backend (build tag cuda) as "cuda".
func RegisterBackend(name string, open func() (Backend, error)) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry = append(registry, BackendFactory{Name: name, Open: open})
}

// Backends returns the registered backends in registration order.
func Backends() []BackendFactory {
	registryMu.Lock()
	defer registryMu.Unlock()
	return append([]BackendFactory(nil), registry...)
}
