package cuda

// DeviceInfo describes one CUDA device as `tune env` reports it.
type DeviceInfo struct {
	Ordinal      int
	Name         string
	Major, Minor int    // compute capability
	MemoryBytes  uint64 // total device memory
	Driver       int    // CUDA driver API version (e.g. 13000)
	// Libraries lists the shared objects opened at run time with the file actually loaded
	// (e.g. "cublasLt: /usr/local/cuda/lib64/libcublasLt.so.13").
	Libraries []string
}

// TensorCores reports whether the device has Tensor Cores (compute capability 7.0 or newer).
func (d DeviceInfo) TensorCores() bool { return d.Major >= 7 }

// BF16 reports whether the device computes bfloat16 natively (compute capability 8.0 or newer).
func (d DeviceInfo) BF16() bool { return d.Major >= 8 }
