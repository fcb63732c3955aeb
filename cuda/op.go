//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// buffer is the CUDA backend's tensor.Buffer: one block of device memory from the caching allocator.
type buffer struct {
	b     *Backend
	ptr   cu.DevicePtr
	n     int // elements of dt
	dt    tensor.DType
	class int64 // allocator size class (0 for an empty buffer)
	owner *tensor.Tensor
	freed bool
}

// Len returns the buffer's capacity in elements (0 after Free).
func (bf *buffer) Len() int {
	if bf.freed {
		return 0
	}
	return bf.n
}

// op is the context of one Backend call: it holds the backend's lock and the device context on a locked OS
// thread, validates arguments (methods chain and keep the first failure, as tensor/cpu's check), and turns
// every failure, or a panic, into a *tensor.OpError naming the op and its arguments' shapes.
type op struct {
	b    *Backend
	name string
	args []*tensor.Tensor
	err  error
}

// begin starts op name on b; always pair with `defer o.end(&err)`.
func (b *Backend) begin(name string, args ...*tensor.Tensor) *op {
	b.mu.Lock()
	runtime.LockOSThread()
	o := &op{b: b, name: name, args: args}
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		o.fail(driverErr("cuCtxSetCurrent", err, "device %d", b.ordinal))
	}
	if len(b.ids) > 0 {
		b.forgetIDs(name, args)
	}
	return o
}

// end releases the backend, recovers a panic, and stores the op's error in *err (wrapped in *tensor.OpError).
func (o *op) end(err *error) {
	if r := recover(); r != nil {
		o.err = fmt.Errorf("cuda: internal error, please report it: %v", r)
	}
	if o.err == nil && debugSync {
		o.fail(driverErr("cuStreamSynchronize", o.sync(), "TUNE_CUDA_SYNC=1"))
	}
	runtime.UnlockOSThread()
	o.b.mu.Unlock()
	if o.err != nil {
		if _, ok := o.err.(*tensor.OpError); ok {
			*err = o.err
		} else {
			*err = tensor.Errorf(o.name, o.err, o.args...)
		}
	}
}

// fail records err (if non-nil and nothing failed before) and returns the op's first error.
func (o *op) fail(err error) error {
	if err != nil && o.err == nil {
		o.err = err
	}
	return o.err
}

// failf records a sentinel-wrapping error.
func (o *op) failf(sentinel error, format string, a ...any) *op {
	o.fail(opcheck.Errorf(sentinel, format, a...))
	return o
}

func (o *op) failed() bool { return o.err != nil }

// that records a failure when ok is false.
func (o *op) that(ok bool, sentinel error, format string, a ...any) *op {
	if !ok {
		o.failf(sentinel, format, a...)
	}
	return o
}

// newOwner tells opcheck.View which buffers are b's: buffers of this package allocated by b.
func (b *Backend) newOwner() opcheck.Owner {
	return opcheck.Owner{
		Buffer: func(x tensor.Buffer) (opcheck.Buffer, bool) {
			bf, ok := x.(*buffer)
			if !ok || bf.b != b {
				return opcheck.Buffer{}, false
			}
			return opcheck.Buffer{DType: bf.dt, Len: bf.n, Freed: bf.freed}, true
		},
		Foreign: "a buffer of " + b.Name() + " (upload it to this backend)",
	}
}

// tensor requires t to be a live view of a buffer of this backend whose dtype is one of dts (opcheck.View).
func (o *op) tensor(name string, t *tensor.Tensor, dts ...tensor.DType) *op {
	if o.err == nil {
		o.fail(opcheck.View(name, t, o.b.owner, dts...))
	}
	return o
}

func (o *op) float(name string, t *tensor.Tensor) *op { return o.tensor(name, t, opcheck.Floats...) }
func (o *op) f32(name string, t *tensor.Tensor) *op   { return o.tensor(name, t, tensor.F32) }
func (o *op) index(name string, t *tensor.Tensor) *op { return o.tensor(name, t, opcheck.Indices...) }

// numel requires t (already checked) to hold n elements.
func (o *op) numel(name string, t *tensor.Tensor, n int) *op {
	if o.err == nil {
		o.fail(opcheck.Numel(name, t, n))
	}
	return o
}

// rows requires rank ≥ 1 and returns the row count and last-axis extent of t (already checked).
func (o *op) rows(name string, t *tensor.Tensor) (n, ch int) {
	if o.err != nil {
		return 0, 0
	}
	n, ch, err := opcheck.Rows(name, t)
	o.fail(err)
	return n, ch
}

// addr is the device address of t's first element (0 for a nil tensor).
func addr(t *tensor.Tensor) uint64 {
	if t == nil {
		return 0
	}
	bf := t.Buf.(*buffer)
	return uint64(bf.ptr) + uint64(t.Offset*t.DType.Size())
}

// dt is t's dtype as a kernel argument (the DT_* codes of kernels/common.cuh equal tensor.DType's values).
func dt(t *tensor.Tensor) uint64 {
	if t == nil {
		return 0
	}
	return uint64(t.DType)
}

// Kernel argument encoders: every argument travels as 8 bytes (gorgonia.org/cu's Launch copies 8 bytes per
// parameter); the driver reads the parameter's own size from its low end (little-endian), so an int or float
// parameter gets its value.
func i64(v int) uint64     { return uint64(int64(v)) }
func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }
func flag(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

// vec reports (as a kernel argument) whether every tensor starts at an address aligned for four-element
// vector accesses: 16 bytes for F32, 8 for F16/BF16.
func vec(ts ...*tensor.Tensor) uint64 {
	for _, t := range ts {
		if t != nil && addr(t)%uint64(4*t.DType.Size()) != 0 {
			return 0
		}
	}
	return 1
}

// function returns a kernel, compiling and loading its file on first use.
func (b *Backend) function(file, name string) (cu.Function, error) {
	key := file + ":" + name
	if f, ok := b.funcs[key]; ok {
		return f, nil
	}
	m, ok := b.modules[file]
	if !ok {
		img, err := compileKernel(file, b.sm)
		if err != nil {
			return cu.Function{}, err
		}
		if m, err = cu.LoadData(string(img.data)); err != nil {
			return cu.Function{}, driverErr("cuModuleLoadData", err, "kernels/%s (%d bytes, cubin=%v)", file, len(img.data), img.cubin)
		}
		if img.philox {
			if err := b.registerPhilox(m, file); err != nil {
				return cu.Function{}, err
			}
		}
		b.modules[file] = m
	}
	f, err := m.Function(name)
	if err != nil {
		return cu.Function{}, driverErr("cuModuleGetFunction", err, "kernel %s in kernels/%s", name, file)
	}
	b.funcs[key] = f
	return f, nil
}

// launch queues kernel file:name on the stream with a (gx, gy) grid of (bx, by) blocks.
func (o *op) launch(file, name string, gx, gy, bx, by int, args ...uint64) {
	if o.err != nil {
		return
	}
	f, err := o.b.function(file, name)
	if o.fail(err) != nil {
		return
	}
	run := func() error {
		params := make([]unsafe.Pointer, len(args))
		for i := range args {
			params[i] = unsafe.Pointer(&args[i])
		}
		return driverErr("cuLaunchKernel", f.Launch(gx, gy, 1, bx, by, 1, 0, o.b.stream, params), "%s (grid %d×%d, block %d×%d)", name, gx, gy, bx, by)
	}
	if o.b.graph == nil { // eager: no record (graph.go)
		o.fail(run())
		return
	}
	fn := *(*unsafe.Pointer)(unsafe.Pointer(&f))
	k := &kernelLaunch{name: name, fn: fn, gx: gx, gy: gy, gz: 1, bx: bx, by: by, args: args}
	o.fail(o.issue(func() []byte { return kernelKey(fn, gx, gy, 1, bx, by, 0) }, k, nil, run))
}

// gridFor returns the block count of a grid-stride kernel over work items with 256-thread blocks, capped
// at 32 blocks per multiprocessor.
func (o *op) gridFor(work int) int {
	g := (work + 255) / 256
	if c := 32 * o.b.sms; g > c {
		g = c
	}
	if g < 1 {
		g = 1
	}
	return g
}

// ew launches a grid-stride elementwise kernel over n elements (groups of four).
func (o *op) ew(file, name string, n int, args ...uint64) {
	if n == 0 {
		return
	}
	o.launch(file, name, o.gridFor((n+3)/4), 1, 256, 1, args...)
}

// rowsLaunch launches a warp-per-row kernel over n rows (eight rows per block).
func (o *op) rowsLaunch(file, name string, n int, args ...uint64) {
	if n == 0 {
		return
	}
	o.launch(file, name, (n+7)/8, 1, 256, 1, args...)
}

// scratch allocates a temporary device buffer of n bytes from the cache; release it with o.release. The
// stream orders its reuse after the kernels queued here.
func (o *op) scratch(n int) cu.DevicePtr {
	if o.err != nil {
		return 0
	}
	p, c, err := o.b.alloc.get(int64(n))
	if o.fail(driverErr("cuMemAlloc", err, "%d bytes of scratch (%s)", n, o.b.memSummary())) != nil {
		return 0
	}
	o.b.scratchClass[p] = c
	return p
}

// release returns a scratch buffer to the cache.
func (o *op) release(p cu.DevicePtr) {
	if c, ok := o.b.scratchClass[p]; ok {
		delete(o.b.scratchClass, p)
		o.b.alloc.put(p, c)
	}
}

// memSummary describes the allocator for out-of-memory messages.
func (b *Backend) memSummary() string {
	s := b.alloc.stats()
	return fmt.Sprintf("%.1f MiB allocated, %.1f MiB reserved, device has %.1f GiB", float64(s.Allocated)/(1<<20), float64(s.Reserved)/(1<<20), float64(b.info.MemoryBytes)/(1<<30))
}
