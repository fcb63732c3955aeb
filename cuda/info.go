package cuda

// DeviceInfo describes one CUDA device as `tune env` reports it.
type DeviceInfo struct {
	Ordinal      int    // the device's index, as CUDA_VISIBLE_DEVICES renumbers it (cuda.Open's argument)
	Name         string // the driver's product name: "NVIDIA H200"
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

// MemoryStats reports a CUDA backend's caching allocator, in bytes of size classes (requests are rounded up;
// see Backend.MemoryStats). The names follow torch.cuda.memory_allocated / max_memory_allocated /
// memory_reserved.
type MemoryStats struct {
	Allocated     int64 // in use by live tensors and scratch buffers
	PeakAllocated int64 // the most Allocated has been since the backend opened or ResetPeakMemoryStats
	Reserved      int64 // obtained from the driver: Allocated plus the cached free blocks
	DeviceAllocs  int64 // cuMemAlloc calls made (cache misses)
	CacheHits     int64 // requests served from the cache
}
