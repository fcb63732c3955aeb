//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"gorgonia.org/cu"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/internal/syncfree"
	"github.com/tune-ml/tune/tensor"
)

// Backend is the CUDA implementation of tensor.Backend for one device: the device's primary context, one
// non-blocking stream on which every op is queued in call order, a caching allocator, cuBLASLt for Gemm and
// NVRTC-compiled kernels for the other ops. Ops return as soon as their work is queued; Download, the
// scalar-returning reductions, Synchronize and the index-validating ops (Embedding, EmbeddingBackward,
// CrossEntropy, CrossEntropyBackward, which check the ids on the host) wait for it — the latter only when
// their ids were not uploaded from the host (hostids.go; unless TUNE_SYNC_FREE=0). HostWaits counts the waits.
//
// A Backend serializes its methods with a mutex, so goroutines may share it; Open returns the same Backend
// for the same ordinal.
type Backend struct {
	mu      sync.Mutex
	ordinal int
	dev     cu.Device
	ctx     cu.CUContext
	stream  cu.Stream
	info    DeviceInfo
	sm      int // compute capability as 10·major + minor
	sms     int // multiprocessor count

	alloc     *allocator
	modules   map[string]cu.Module
	funcs     map[string]cu.Function
	lt        *ltState
	blas      *blasState             // legacy cuBLAS, for unbatched true-FP32 products (gemmf32.go)
	blasErr   error                  // why libcublas could not be loaded (those products then run on cuBLASLt)
	f32Keep   map[uint64]f32KeepMark // KeepBits buffers an FP32-path forward filled (attention_f32.go)
	allowTF32 bool

	scratchClass map[cu.DevicePtr]int64 // size classes of live scratch buffers
	stagedGemms  map[string]int         // GEMMs that took the staged fallback path, by reason
	waits        map[string]int64       // host waits for the device, by op name (HostWaits)
	ids          map[uint64]*hostIDs    // host copies of uploaded index tensors, by device address (hostids.go)
	keepIDs      bool                   // Upload keeps those copies (unless TUNE_SYNC_FREE=0, internal/syncfree)
	graph        *StepGraph             // the step graph capturing or replaying now (graph.go); nil: eager
	gstate       graphState
	htodBytes    int             // host-to-device bytes issued so far (plus 256 each), for StepGraph's probe
	staging      stagingRing     // page-locked ring the eager uploads go through (staging.go)
	gate         gateWord        // TimeGated's page-locked flag (gate.go)
	owner        opcheck.Owner   // which buffers are this backend's (op.tensor's opcheck.View)
	colsumCount  cu.DevicePtr    // the column sums' per-tile counters (elementwise.go colsumCounters), 0 until used
	noWgmma      bool            // the NVRTC cannot compile sm_90a (errNoSM90a): no wgmma kernels (attention.go's fwdWgmma)
	philoxBase   uint64          // the dropout kernels' Philox base (philox.go), as their modules' constants hold it
	philoxConsts []cu.DevicePtr  // those constants (tune_philox_base) of the loaded modules
	smemSet      map[uintptr]int // kernels' raised dynamic shared memory limits (smem.go launchShared)
	smemOptIn    int             // the device's opt-in shared memory per block, 0 until read (smem.go sharedOptIn)
}

var _ tensor.Backend = (*Backend)(nil)

func init() {
	tensor.RegisterBackend("cuda", func() (tensor.Backend, error) { return Open(0) })
}

var (
	openMu sync.Mutex
	opened = map[int]*Backend{}
)

// Open returns the CUDA backend for device ordinal (0-based), opening it on first use: it retains the device's
// primary context and creates a stream. cuBLASLt and NVRTC are opened when the first GEMM or kernel needs them.
// Without a usable driver or device the error wraps tensor.ErrNoDevice; an ordinal out of range is an
// ErrArgument naming the device count. FP32 GEMMs are true FP32 unless TF32 is allowed with SetAllowTF32.
func Open(ordinal int) (tensor.Backend, error) {
	b, err := open(ordinal)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func open(ordinal int) (*Backend, error) {
	openMu.Lock()
	defer openMu.Unlock()
	if b, ok := opened[ordinal]; ok {
		return b, nil
	}
	if st := driverInitStatus(); st != 0 {
		return nil, driverErrCode("cuInit", st, "no usable NVIDIA driver or GPU on this machine")
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, driverErr("cuDeviceGetCount", err, "")
	}
	if n == 0 {
		return nil, fmt.Errorf("cuda: the driver reports no CUDA device: %w", tensor.ErrNoDevice)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d does not exist (this machine has %d: cuda:0..cuda:%d): %w", ordinal, n, n-1, tensor.ErrArgument)
	}
	info, err := deviceInfo(ordinal)
	if err != nil {
		return nil, err
	}
	b := &Backend{ordinal: ordinal, info: info, sm: 10*info.Major + info.Minor, alloc: newAllocator(),
		modules: map[string]cu.Module{}, funcs: map[string]cu.Function{}, scratchClass: map[cu.DevicePtr]int64{}, stagedGemms: map[string]int{},
		waits: map[string]int64{}, ids: map[uint64]*hostIDs{}, keepIDs: syncfree.Enabled()}
	b.owner = b.newOwner()
	if b.dev, err = cu.GetDevice(ordinal); err != nil {
		return nil, driverErr("cuDeviceGet", err, "device %d", ordinal)
	}
	if b.sms, err = b.dev.Attribute(cu.MultiprocessorCount); err != nil {
		return nil, driverErr("cuDeviceGetAttribute", err, "multiprocessor count of device %d", ordinal)
	}
	if b.ctx, err = b.dev.RetainPrimaryCtx(); err != nil {
		return nil, driverErr("cuDevicePrimaryCtxRetain", err, "device %d", ordinal)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		return nil, driverErr("cuCtxSetCurrent", err, "device %d", ordinal)
	}
	if b.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return nil, driverErr("cuStreamCreate", err, "device %d", ordinal)
	}
	opened[ordinal] = b
	return b, nil
}

// deviceInfo reads one device's name, capability and memory.
func deviceInfo(ordinal int) (DeviceInfo, error) {
	d, err := cu.GetDevice(ordinal)
	if err != nil {
		return DeviceInfo{}, driverErr("cuDeviceGet", err, "device %d", ordinal)
	}
	info := DeviceInfo{Ordinal: ordinal, Driver: cu.Version()}
	if info.Name, err = d.Name(); err != nil {
		return info, driverErr("cuDeviceGetName", err, "device %d", ordinal)
	}
	if info.Major, err = d.Attribute(cu.ComputeCapabilityMajor); err != nil {
		return info, driverErr("cuDeviceGetAttribute", err, "device %d", ordinal)
	}
	if info.Minor, err = d.Attribute(cu.ComputeCapabilityMinor); err != nil {
		return info, driverErr("cuDeviceGetAttribute", err, "device %d", ordinal)
	}
	mem, err := d.TotalMem()
	if err != nil {
		return info, driverErr("cuDeviceTotalMem", err, "device %d", ordinal)
	}
	info.MemoryBytes = uint64(mem)
	info.Libraries = libraryReport()
	return info, nil
}

// libraryReport lists the run-time libraries: the file loaded, or why none could be.
func libraryReport() []string {
	var out []string
	if h, err := dlopen("libcuda.so.1"); err == nil {
		out = append(out, "cuda driver: "+dlpath(h, "libcuda.so.1"))
	}
	if p, err := libCublasLt.load(); err == nil {
		out = append(out, fmt.Sprintf("cublasLt: %s (version %d)", p, ltVersion()))
	} else {
		out = append(out, "cublasLt: "+err.Error())
	}
	if p, err := libCublas.load(); err == nil {
		out = append(out, "cublas: "+p+" (unbatched FP32 products)")
	} else {
		out = append(out, "cublas: "+err.Error()+" (FP32 products run on cuBLASLt)")
	}
	if nv, err := loadNVRTC(); err == nil {
		out = append(out, fmt.Sprintf("nvrtc: %s (NVRTC %d.%d)", nv.path, nv.major, nv.minor))
	} else {
		out = append(out, "nvrtc: "+err.Error())
	}
	if d := kernelCacheDir(); d != "" {
		out = append(out, "kernel cache: "+d)
	}
	return out
}

// Available reports whether this binary has CUDA support and at least one device can be used.
func Available() bool {
	ds, err := Probe()
	return err == nil && len(ds) > 0
}

// Probe lists the CUDA devices with the libraries loaded to reach them (for `tune env`). Without a usable
// driver or device the error wraps tensor.ErrNoDevice.
func Probe() ([]DeviceInfo, error) {
	if st := driverInitStatus(); st != 0 {
		return nil, driverErrCode("cuInit", st, "no usable NVIDIA driver or GPU on this machine")
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, driverErr("cuDeviceGetCount", err, "")
	}
	out := make([]DeviceInfo, 0, n)
	for i := 0; i < n; i++ {
		info, err := deviceInfo(i)
		if err != nil {
			return out, err
		}
		out = append(out, info)
	}
	if n == 0 {
		return nil, fmt.Errorf("cuda: the driver reports no CUDA device: %w", tensor.ErrNoDevice)
	}
	return out, nil
}

// Name returns "cuda:N".
func (b *Backend) Name() string { return fmt.Sprintf("cuda:%d", b.ordinal) }

// Info describes the device and the libraries this backend uses.
func (b *Backend) Info() DeviceInfo { return b.info }

// SetAllowTF32 lets FP32 GEMMs use TF32 Tensor Cores (cuBLASLt CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded
// to 10 mantissa bits, FP32 accumulation), as torch.backends.cuda.matmul.allow_tf32 and HF's `tf32` option
// do. Off by default, so FP32 results stay true FP32. Half-precision GEMMs are not affected.
func (b *Backend) SetAllowTF32(allow bool) {
	b.mu.Lock()
	b.allowTF32 = allow
	b.mu.Unlock()
}

// AllowTF32 reports whether FP32 GEMMs may use TF32.
func (b *Backend) AllowTF32() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.allowTF32
}

// MemoryStats returns the caching allocator's counters. Queued work may still be using the memory counted.
func (b *Backend) MemoryStats() MemoryStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.alloc.stats()
}

// ResetPeakMemoryStats sets PeakAllocated to the current Allocated (torch.cuda.reset_peak_memory_stats).
func (b *Backend) ResetPeakMemoryStats() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.alloc.peak = b.alloc.allocated
}

// GemmStats reports how many GEMM plans (shape, dtype, alignment and epilogue combinations) cuBLASLt's
// heuristic was asked for, and how many GEMMs took the slower staged path because cuBLASLt had no algorithm
// for the caller's layout or dtypes (see Gemm).
func (b *Backend) GemmStats() (plans, staged int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lt != nil {
		plans = len(b.lt.plans)
	}
	for _, n := range b.stagedGemms {
		staged += n
	}
	return plans, staged
}

// EmptyCache waits for queued work and returns the cached free blocks to the driver
// (torch.cuda.empty_cache); blocks of live tensors are kept.
func (b *Backend) EmptyCache() (err error) {
	o := b.begin("EmptyCache")
	defer o.end(&err)
	if err := o.sync(); err != nil {
		return o.fail(driverErr("cuStreamSynchronize", err, ""))
	}
	return o.fail(driverErr("cuMemFree", b.alloc.emptyCache(), "releasing cached blocks"))
}

// Synchronize waits until every queued op has finished and reports an asynchronous failure of any of them
// (an illegal address in a kernel shows up here, named CUDA_ERROR_ILLEGAL_ADDRESS).
func (b *Backend) Synchronize() (err error) {
	o := b.begin("Synchronize")
	defer o.end(&err)
	return o.fail(driverErr("cuStreamSynchronize", o.sync(), "a queued op failed"))
}

// SetAllowTF32 sets whether FP32 GEMMs of b may use TF32 (see Backend.SetAllowTF32). It fails for a backend
// that is not a CUDA one.
func SetAllowTF32(b tensor.Backend, allow bool) error {
	cb, ok := b.(*Backend)
	if !ok {
		return fmt.Errorf("cuda: SetAllowTF32 needs a CUDA backend, got %s", b.Name())
	}
	cb.SetAllowTF32(allow)
	return nil
}

// Memory returns b's allocator counters, and false if b is not a CUDA backend.
func Memory(b tensor.Backend) (MemoryStats, bool) {
	cb, ok := b.(*Backend)
	if !ok {
		return MemoryStats{}, false
	}
	return cb.MemoryStats(), true
}

// debugSync, set by TUNE_CUDA_SYNC=1, makes every op wait for its kernels so that an asynchronous failure is
// reported by the op that caused it (as CUDA_LAUNCH_BLOCKING=1 does for PyTorch).
var debugSync = os.Getenv("TUNE_CUDA_SYNC") == "1"

var errFreed = errors.New("buffer was freed")

// Time runs fn, which queues ops on b, between two CUDA events recorded on b's stream and returns the device
// time between them in milliseconds (cuEventElapsedTime; about 0.5 µs resolution). It waits for the end
// event. Warm up first: the first call of an op may compile kernels or choose GEMM algorithms.
func (b *Backend) Time(fn func() error) (ms float64, err error) {
	var start, stop cu.Event
	rec := func(ev *cu.Event, what string) (rerr error) {
		o := b.begin("Time")
		defer o.end(&rerr)
		e, cerr := cu.MakeEvent(cu.DefaultEvent)
		if o.fail(driverErr("cuEventCreate", cerr, "%s", what)) != nil {
			return
		}
		*ev = e
		o.fail(driverErr("cuEventRecord", e.Record(b.stream), "%s", what))
		return
	}
	defer func() {
		for _, e := range []*cu.Event{&start, &stop} {
			if *e != (cu.Event{}) {
				cu.DestroyEvent(e)
			}
		}
	}()
	if err := rec(&start, "start"); err != nil {
		return 0, err
	}
	if err := fn(); err != nil {
		return 0, err
	}
	if err := rec(&stop, "stop"); err != nil {
		return 0, err
	}
	o := b.begin("Time")
	defer o.end(&err)
	b.countWait("Time")
	if o.fail(driverErr("cuEventSynchronize", stop.Synchronize(), "stop")) != nil {
		return 0, o.err
	}
	ms, eerr := start.Elapsed(stop)
	return ms, o.fail(driverErr("cuEventElapsedTime", eerr, ""))
}
