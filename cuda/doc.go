// Package cuda is tune's NVIDIA GPU backend: every GEMM on cuBLASLt Tensor Cores, every other op a CUDA kernel
// compiled at run time with NVRTC. It needs the build tag cuda; without it Open returns an error wrapping
// tensor.ErrNoDevice that says the binary was built without CUDA support.
//
// Simplest use: the backend registers itself as "cuda" (tensor.Backends), or open it directly:
//
//	b, err := cuda.Open(0) // device 0; an error wrapping tensor.ErrNoDevice without a GPU
//	x, _ := b.Alloc(tensor.BF16, 4096, 768)
//	_ = b.Upload(x, values)  // []float32, rounded to BF16 on the host
//	_ = b.GELU(x, x)         // queued on the backend's stream
//	_ = b.Download(out, x)   // waits, then copies back
//
// Available reports whether a device can be used (recipes' device "auto" asks it), and Probe lists the
// devices with the libraries loaded to reach them, as `tune env` prints them.
//
// Full control needs the concrete type, which exists only in a binary built with -tags cuda:
//
//	cb := b.(*cuda.Backend)
//	cb.SetAllowTF32(true)                              // FP32 GEMMs on TF32 Tensor Cores (off by default)
//	ms, err := cb.Time(func() error { return step() }) // ms of device time between two CUDA events
//	st := cb.MemoryStats()                             // Allocated, PeakAllocated, Reserved, in bytes
//
// What a CUDA build links and loads:
//   - libcuda.so.1 only, through gorgonia.org/cu (context, stream, events, memory, module loading,
//     launches). cuBLASLt and NVRTC are opened with dlopen by soname, newest first (libcublasLt.so.13, .12,
//     .11; libnvrtc.so.13, .12, .11.2), from $CUDA_HOME/lib64, $CUDA_PATH/lib64, the loader's own search
//     (LD_LIBRARY_PATH, the ld.so cache) and /usr/local/cuda/lib64, unless TUNE_CUBLASLT or TUNE_NVRTC names
//     the file. So a binary built against the CUDA 11.8 headers runs with CUDA 13's libraries. Probe and
//     DeviceInfo.Libraries report the files loaded (`tune env`).
//   - NCCL (libnccl.so.2) is opened the same way, on first use, unless TUNE_NCCL names the file: NewUniqueID,
//     NewComm (ncclCommInitRank; the 128-byte ncclUniqueId passed by value through a shim with self-declared
//     types, as there is no nccl.h at build time), Comm.AllReduce (Sum, Max or Avg of F32/F16/BF16 tensors in place
//     on the backend's stream; several tensors form one ncclGroupStart/End group), Comm.AsyncError
//     (ncclCommGetAsyncError), Comm.Abort. Errors carry NCCL's own strings (ncclGetErrorString,
//     ncclGetLastError). Without the cuda tag they fail with an error wrapping tensor.ErrNoDevice.
//   - gorgonia.org/cu calls cuInit from its package init and exits the process if that fails. This package
//     interposes cuInit (tunecuda.c) so that a CUDA build starts on a machine without a GPU and Open returns
//     an error wrapping tensor.ErrNoDevice instead; tests then skip.
//
// Kernels: cuda/kernels/*.cu are embedded, compiled by NVRTC on first use for the device's architecture
// (sm_90 on an H100/H200; PTX for the newest supported architecture when NVRTC is older than the device;
// sm_90a for the modules that include kernels/wgmma.cuh, Hopper's warpgroup MMA, only on an sm_90 device with
// NVRTC 12.0 or newer, else those modules are not compiled and their callers keep the sm_90 kernels) and
// cached on disk in $TUNE_KERNEL_CACHE or $XDG_CACHE_HOME/tune/kernels (~/.cache/tune/kernels), keyed by a
// hash of the NVRTC version, options, target and sources. A compile error is an *Error whose Detail holds
// NVRTC's log. Each kernel file's header says which variants exist and why; kernels/common.cuh holds the
// exact FP16/BF16 conversions (bit-identical to the tensor package's) and the Philox generator shared with
// tensor.PhiloxUniform. The dropout kernels add their module's constant tune_philox_base (kernels/philox.cuh,
// Backend.SetPhiloxBase) to the offsets they are given, so that a captured training step (StepGraph, graph.go)
// replays the same arguments every step.
//
// GEMMs (Backend.Gemm): row-major C = alpha·op(A)·op(B) + beta·C (+ bias) is computed as the column-major
// Cᵀ = op(B)ᵀ·op(A)ᵀ with CUBLAS_COMPUTE_32F, transposes, leading dimensions and strided batches as layout
// attributes, the bias fused as the BIAS epilogue where cuBLASLt takes it, split-K reductions in FP32 only,
// a 32 MiB workspace, and the heuristic's algorithm chosen once per shape, dtype, alignment and epilogue.
// FP32 GEMMs stay true FP32 unless SetAllowTF32(true). When cuBLASLt has no algorithm for a layout or dtype
// pair, a staged path packs the operands into aligned scratch and still rounds C once.
//
// Memory: a caching allocator (size classes of four steps per power of two) serves Alloc, Free and the ops'
// scratch buffers on the backend's one stream, the lowest free block of a class first; MemoryStats reports the bytes allocated, the peak and the
// bytes reserved from the driver, as torch.cuda.memory_allocated / max_memory_allocated / memory_reserved.
//
// Errors: every op returns a *tensor.OpError naming the op and its argument shapes; a failed CUDA, cuBLASLt
// or NVRTC call inside it is an *Error carrying the library's status name (CUDA_ERROR_OUT_OF_MEMORY,
// CUBLAS_STATUS_NOT_SUPPORTED, NVRTC_ERROR_COMPILATION). Ops are asynchronous: a kernel fault surfaces at the
// next synchronizing call; TUNE_CUDA_SYNC=1 makes every op wait so the failing op reports it.
package cuda
