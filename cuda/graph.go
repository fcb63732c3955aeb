//go:build cuda

package cuda

/*
#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

// The graph entry points are looked up at run time (dlsym), so that a driver without one turns graphs off
// instead of keeping the binary from starting.
typedef CUresult (*tc_begin_fn)(CUstream, CUstreamCaptureMode);
typedef CUresult (*tc_end_fn)(CUstream, CUgraph *);
typedef CUresult (*tc_inst_fn)(CUgraphExec *, CUgraph, unsigned long long);
typedef CUresult (*tc_launch_fn)(CUgraphExec, CUstream);
typedef CUresult (*tc_execdestroy_fn)(CUgraphExec);
typedef CUresult (*tc_destroy_fn)(CUgraph);
typedef CUresult (*tc_setkernel_fn)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *);
typedef CUresult (*tc_info2_fn)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *, const CUgraphNode **, size_t *);
typedef CUresult (*tc_info3_fn)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *, const CUgraphNode **,
                                const void **, size_t *);

static tc_begin_fn p_begin;
static tc_end_fn p_end;
static tc_inst_fn p_inst;
static tc_launch_fn p_launch;
static tc_execdestroy_fn p_execdestroy;
static tc_destroy_fn p_destroy;
static tc_setkernel_fn p_setkernel;
static tc_info2_fn p_info2;
static tc_info3_fn p_info3;

// tc_graph_bind resolves the entry points; it returns the name of a missing one, or NULL.
static const char *tc_graph_bind(void) {
	p_begin = (tc_begin_fn)dlsym(RTLD_DEFAULT, "cuStreamBeginCapture_v2");
	if (!p_begin) return "cuStreamBeginCapture_v2";
	p_end = (tc_end_fn)dlsym(RTLD_DEFAULT, "cuStreamEndCapture");
	if (!p_end) return "cuStreamEndCapture";
	p_inst = (tc_inst_fn)dlsym(RTLD_DEFAULT, "cuGraphInstantiateWithFlags");
	if (!p_inst) return "cuGraphInstantiateWithFlags";
	p_launch = (tc_launch_fn)dlsym(RTLD_DEFAULT, "cuGraphLaunch");
	if (!p_launch) return "cuGraphLaunch";
	p_execdestroy = (tc_execdestroy_fn)dlsym(RTLD_DEFAULT, "cuGraphExecDestroy");
	if (!p_execdestroy) return "cuGraphExecDestroy";
	p_destroy = (tc_destroy_fn)dlsym(RTLD_DEFAULT, "cuGraphDestroy");
	if (!p_destroy) return "cuGraphDestroy";
	p_setkernel = (tc_setkernel_fn)dlsym(RTLD_DEFAULT, "cuGraphExecKernelNodeSetParams");
	if (!p_setkernel) return "cuGraphExecKernelNodeSetParams";
	p_info2 = (tc_info2_fn)dlsym(RTLD_DEFAULT, "cuStreamGetCaptureInfo_v2");
	p_info3 = (tc_info3_fn)dlsym(RTLD_DEFAULT, "cuStreamGetCaptureInfo_v3");
	if (!p_info2 && !p_info3) return "cuStreamGetCaptureInfo_v2";
	return NULL;
}

static int tc_begin_capture(void *stream) {
	return (int)p_begin((CUstream)stream, CU_STREAM_CAPTURE_MODE_RELAXED);
}

static int tc_end_capture(void *stream, CUgraph *g) { return (int)p_end((CUstream)stream, g); }

static int tc_instantiate(CUgraphExec *e, CUgraph g) { return (int)p_inst(e, g, 0); }

static int tc_graph_launch(CUgraphExec e, void *stream) { return (int)p_launch(e, (CUstream)stream); }

static void tc_graph_free(CUgraphExec e, CUgraph g) {
	if (e && p_execdestroy) p_execdestroy(e);
	if (g && p_destroy) p_destroy(g);
}

// tc_last_node returns the node a capturing stream's next operation would depend on: the one just captured.
static int tc_last_node(void *stream, CUgraphNode *node) {
	CUstreamCaptureStatus st;
	cuuint64_t id;
	CUgraph g;
	const CUgraphNode *deps = NULL;
	const void *edges = NULL;
	size_t n = 0;
	CUresult r = p_info2 ? p_info2((CUstream)stream, &st, &id, &g, &deps, &n)
	                     : p_info3((CUstream)stream, &st, &id, &g, &deps, &edges, &n);
	if (r != CUDA_SUCCESS) return (int)r;
	if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE || n != 1) return -1;
	*node = deps[0];
	return 0;
}

// tc_set_kernel updates a kernel node of an executable graph: its function, grid, block, shared memory and
// arguments (args: pointers to the values, copied by the driver).
static int tc_set_kernel(CUgraphExec e, CUgraphNode node, void *fn, unsigned gx, unsigned gy, unsigned gz,
                         unsigned bx, unsigned by, unsigned smem, void **args) {
	CUDA_KERNEL_NODE_PARAMS p;
	memset(&p, 0, sizeof p);
	p.func = (CUfunction)fn;
	p.gridDimX = gx; p.gridDimY = gy; p.gridDimZ = gz;
	p.blockDimX = bx; p.blockDimY = by; p.blockDimZ = 1;
	p.sharedMemBytes = smem;
	p.kernelParams = args;
	return (int)p_setkernel(e, node, &p);
}

*/
import "C"

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/tune-ml/tune/tensor"
)

// One CUDA graph per training step.
//
// A training step issues the same stream operations every time (the same kernels on the same static arena
// buffers, the same GEMM plans, the same scratch blocks from the caching allocator, which hands out the lowest
// free block), so it can be captured once (cuStreamBeginCapture … cuStreamEndCapture, cuGraphInstantiate)
// and replayed with one cuGraphLaunch, which removes the per-launch driver work and the gaps between kernels.
// What differs between steps is kept out of the kernels' arguments: the Philox offset of each dropout is
// relative to a base the caller sets before the step (Backend.SetPhiloxBase, philox.go), AdamW's scalars come
// from a device table (tensor.AdamWArgs.Table/Row) the caller writes before the step, and the step's uploads
// (the batch) go through device slots: the graph copies slot → destination where the step uploads, and the
// bytes reach the slot by an ordinary upload issued just before each launch. A replay then launches the graph
// unchanged.
//
// A replay is checked, not assumed, for StepGraph.Verify replays after each capture: StepGraph.Run runs the
// step's host code again with every stream operation recorded instead of issued, compares the record with the
// captured one, updates the kernel nodes whose arguments still changed (cuGraphExecKernelNodeSetParams;
// GraphStats.Patched counts them), uploads the step's bytes into the slots and launches the graph. Anything
// else that differs — an operation that is not there, another kernel or grid, a GEMM, a copy or a fill with
// other arguments, an upload of another size — makes the step run eagerly: the recorded operations are issued
// in order, and the rest of the step as usual (the graph is captured again later). After Verify checked
// replays, a replay launches the graph first and then runs the host code with the stream operations compared
// (kernels by function, grid and arguments; uploads by their bytes) but not issued: the host's work overlaps
// the device's. A difference found then is an error, the graph's operations having run instead of the step's.
//
// A step that waits for the device (a Download, a scalar read) or allocates device memory cannot be captured:
// the first step after warm-up runs as a probe, and a probe that waits or allocates turns graphs off with the
// reason (StepGraph.Off). Nothing of this changes the values computed: a replayed step issues exactly the
// operations of an eager one.

// graphBind resolves the driver's graph entry points once (tc_graph_bind); graphBindErr says what is missing.
var (
	graphBind    sync.Once
	graphBindErr string
)

// graphState is where a Backend's stream operations go.
type graphState uint8

const (
	graphEager     graphState = iota // issued as they come
	graphProbing                     // issued; counted to see whether the step could be captured
	graphCapturing                   // issued into the capture and recorded
	graphReplaying                   // recorded and compared with the capture, issued only on a mismatch
	graphTrusted                     // compared with the capture after its graph was launched; never issued
)

// streamOp is one recorded stream operation of a step: what it is (key), how to issue it eagerly (run),
// and, for a kernel, what a graph node update needs; for an upload, its bytes and slot.
type streamOp struct {
	key  []byte       // kind, function, grid and every argument other than a kernel's parameters
	run  func() error // issues the operation on the stream (eager execution of a recorded op)
	kern *kernelLaunch
	node C.CUgraphNode // the captured kernel node

	data []byte // an upload's bytes (the last ones its slot received, in the trace)
	slot int    // an upload's offset in the slot buffer; -1 for other operations
}

// kernelLaunch is what cuGraphExecKernelNodeSetParams needs for one kernel: its function, grid, block,
// dynamic shared memory, and either 8-byte arguments (op.launch) or one struct argument of blobLen bytes at
// blob (attention's attnParams).
type kernelLaunch struct {
	name               string
	fn                 unsafe.Pointer
	gx, gy, gz, bx, by int
	smem               int
	args               []uint64
	blob               []byte
}

// same reports whether k launches what c does (function, grid, block, shared memory and arguments).
func (k *kernelLaunch) same(c *kernelLaunch) bool {
	return c != nil && k.fn == c.fn && k.gx == c.gx && k.gy == c.gy && k.gz == c.gz && k.bx == c.bx && k.by == c.by &&
		k.smem == c.smem && slices.Equal(k.args, c.args) && bytes.Equal(k.blob, c.blob)
}

// StepGraph captures and replays one training step as a CUDA graph on a Backend (see above).
type StepGraph struct {
	// Verify is how many replays after each capture are checked before the step's host code runs (see above)
	// before replays launch first and compare after; negative: every replay is checked (the default).
	Verify int

	b                 *Backend
	warmup            int // eager steps before the probe
	steps             int
	checked           int // checked replays since the capture
	graph             C.CUgraph
	exec              C.CUgraphExec
	trace             []streamOp   // the captured step's operations
	slots             cu.DevicePtr // device slots of the step's uploads (allocated before the capture)
	slotCap, slotUsed int          // their size (the probe's upload bytes, rounded up) and use
	probeHtoD         int          // host-to-device bytes of the probe step
	off               string       // why graphs are off ("" while they are on)
	current           []streamOp   // the replaying step's operations so far
	pos               int          // the next captured operation to compare with
	broken            bool         // the replaying step did not match: it runs eagerly
	diverged          string       // a trusted replay's first difference from the capture
	patchedKernels    map[string]int
	Replays, Captures int    // GraphStats
	Eager, Patched    int    // GraphStats
	Mismatch          string // GraphStats
}

// Stats reports how the steps ran so far.
func (g *StepGraph) Stats() GraphStats {
	st := GraphStats{Replays: g.Replays, Captures: g.Captures, Eager: g.Eager, Patched: g.Patched, Off: g.off, Mismatch: g.Mismatch}
	for name, n := range g.patchedKernels {
		st.PatchedKernels = append(st.PatchedKernels, fmt.Sprintf("%s×%d", name, n))
	}
	slices.Sort(st.PatchedKernels)
	return st
}

// NewStepGraph returns a StepGraph for steps on b that runs warmup steps eagerly first (kernel compilation,
// GEMM plans, the allocator's first allocations), then one probe step, then captures. Every replay is
// checked (Verify −1) unless the caller sets Verify.
func (b *Backend) NewStepGraph(warmup int) *StepGraph {
	return &StepGraph{b: b, warmup: warmup, Verify: -1}
}

// Off returns why graphs are off for these steps ("" while they are on).
func (g *StepGraph) Off() string { return g.off }

// Close releases the graph and its upload slots.
func (g *StepGraph) Close() {
	b := g.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if g.slots != 0 { // a launch in flight may still read the slots
		runtime.LockOSThread()
		if cu.SetCurrentContext(b.ctx) == nil {
			b.stream.Synchronize()
		}
		runtime.UnlockOSThread()
	}
	g.release()
	if g.off == "" { // keep the reason graphs went off, if they did
		g.off = "closed"
	}
}

func (g *StepGraph) release() {
	g.dropGraph()
	if g.slots != 0 {
		cu.MemFree(g.slots)
	}
	g.slots, g.slotCap, g.slotUsed = 0, 0, 0
}

// dropGraph destroys the executable graph (a launch in flight finishes) and forgets the capture; the upload
// slots stay for the next capture.
func (g *StepGraph) dropGraph() {
	C.tc_graph_free(g.exec, g.graph)
	g.exec, g.graph, g.trace = nil, nil, nil
}

// Run runs one step: fn issues the step's ops on g's Backend. It is eager during warm-up and for the probe, a
// capture (then one launch of the new graph) for the step after the probe, and a replay afterwards.
func (g *StepGraph) Run(fn func() error) error {
	if g.off != "" {
		g.Eager++
		return fn()
	}
	g.steps++
	switch {
	case g.steps <= g.warmup:
		g.Eager++
		return fn()
	case g.steps == g.warmup+1:
		return g.probe(fn)
	case g.exec == nil:
		graphBind.Do(func() {
			if missing := C.tc_graph_bind(); missing != nil {
				graphBindErr = "the driver lacks " + C.GoString(missing)
			}
		})
		if graphBindErr != "" {
			g.off = graphBindErr
			g.Eager++
			return fn()
		}
		return g.capture(fn)
	case g.Verify >= 0 && g.checked >= g.Verify:
		return g.replayTrusted(fn)
	default:
		return g.replay(fn)
	}
}

// probe runs fn eagerly, counting host waits and device allocations; either turns graphs off.
func (g *StepGraph) probe(fn func() error) error {
	b := g.b
	b.mu.Lock()
	w0, m0, h0 := total(b.waits), b.alloc.mallocs, b.htodBytes
	b.mu.Unlock()
	g.Eager++
	if err := fn(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	g.probeHtoD = b.htodBytes - h0
	if w := total(b.waits) - w0; w > 0 {
		g.off = fmt.Sprintf("the step waits for the device %d times (%v so far): it cannot be captured", w, b.waits)
	} else if m := b.alloc.mallocs - m0; m > 0 {
		g.off = fmt.Sprintf("the step allocated device memory %d times (cuMemAlloc): it cannot be captured", m)
	}
	return nil
}

func total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// capture runs fn into a stream capture, instantiates the graph, fills the upload slots and launches the
// graph once (capturing executes nothing).
func (g *StepGraph) capture(fn func() error) (err error) {
	b := g.b
	runtime.LockOSThread() // relaxed capture; ops lock the thread again (nested)
	defer runtime.UnlockOSThread()
	b.mu.Lock()
	st := streamHandle(b.stream)
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		b.mu.Unlock()
		return driverErr("cuCtxSetCurrent", err, "device %d", b.ordinal)
	}
	if g.slots == 0 { // the slots of the step's uploads, allocated before the capture
		g.slotCap = 2*g.probeHtoD + 1<<16
		p, aerr := cu.MemAlloc(int64(g.slotCap))
		if aerr != nil {
			b.mu.Unlock()
			g.off = fmt.Sprintf("cuMemAlloc of %d bytes of upload slots failed: %v", g.slotCap, aerr)
			g.Eager++
			return fn()
		}
		g.slots = p
	}
	g.slotUsed = 0
	if rc := C.tc_begin_capture(st); rc != 0 {
		b.mu.Unlock()
		g.off = fmt.Sprintf("cuStreamBeginCapture failed (%d)", int(rc))
		g.Eager++
		return fn()
	}
	b.graph, b.gstate = g, graphCapturing
	b.mu.Unlock()
	ferr := fn()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.graph, b.gstate = nil, graphEager
	var graph C.CUgraph
	rc := C.tc_end_capture(st, &graph)
	if ferr != nil || rc != 0 {
		C.tc_graph_free(nil, graph)
		g.release()
		if ferr == nil {
			ferr = driverErrCode("cuStreamEndCapture", int(rc), "capturing a training step")
		}
		g.off = "capture failed: " + ferr.Error()
		return fmt.Errorf("cuda: capturing a training step (its work did not run): %w", ferr)
	}
	var exec C.CUgraphExec
	if rc := C.tc_instantiate(&exec, graph); rc != 0 {
		C.tc_graph_free(nil, graph)
		g.release()
		g.off = fmt.Sprintf("cuGraphInstantiate failed (%d)", int(rc))
		return driverErrCode("cuGraphInstantiate", int(rc), "a captured training step (its work did not run)")
	}
	g.graph, g.exec = graph, exec
	g.Captures++
	g.checked = 0
	return g.launchLocked(g.trace)
}

// launchLocked uploads the step's bytes (ops: the trace's uploads, in order) into their slots and launches
// the graph.
func (g *StepGraph) launchLocked(ops []streamOp) error {
	b := g.b
	runtime.LockOSThread() // the context is current per thread
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		return driverErr("cuCtxSetCurrent", err, "device %d", b.ordinal)
	}
	for i := range ops {
		c := &ops[i]
		if c.slot < 0 {
			continue
		}
		dst := uint64(g.slots) + uint64(g.trace[i].slot)
		if staged, err := b.stageUpload(dst, unsafe.Pointer(&c.data[0]), len(c.data), "a graph's upload slot"); !staged {
			err = driverErr("cuMemcpyHtoDAsync", cu.MemcpyHtoDAsync(cu.DevicePtr(dst), unsafe.Pointer(&c.data[0]), int64(len(c.data)), b.stream), "%d bytes (a graph's upload slot)", len(c.data))
			if err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		g.trace[i].data = c.data
	}
	if rc := C.tc_graph_launch(g.exec, streamHandle(b.stream)); rc != 0 {
		return driverErrCode("cuGraphLaunch", int(rc), "a training step's graph")
	}
	return nil
}

// replay runs fn's host code with the stream operations recorded, then launches the graph when they match
// the capture (kernel arguments updated), and otherwise issues them eagerly.
func (g *StepGraph) replay(fn func() error) error {
	b := g.b
	b.mu.Lock()
	b.graph, b.gstate = g, graphReplaying
	g.current, g.pos, g.broken = g.current[:0], 0, false
	b.mu.Unlock()
	ferr := fn()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.graph, b.gstate = nil, graphEager
	if ferr != nil {
		g.flushLocked() // issue what was recorded: the step's partial work, as an eager step would have done
		return ferr
	}
	if g.broken {
		g.Eager++
		return nil
	}
	if g.pos != len(g.trace) {
		g.Mismatch = fmt.Sprintf("the step issued %d stream operations, the captured one %d", g.pos, len(g.trace))
		g.recaptureLocked()
		return g.flushLocked()
	}
	for i := range g.current {
		c, t := &g.current[i], &g.trace[i]
		if c.kern == nil || c.kern.same(t.kern) {
			continue
		}
		if err := g.setKernel(t.node, c.kern); err != nil {
			g.Mismatch = err.Error()
			g.recaptureLocked()
			return g.flushLocked()
		}
		t.kern = c.kern
		g.Patched++
		if g.patchedKernels == nil {
			g.patchedKernels = map[string]int{}
		}
		g.patchedKernels[c.kern.name]++
	}
	if err := g.launchLocked(g.current); err != nil {
		return err
	}
	g.Replays++
	g.checked++
	return nil
}

// replayTrusted launches the graph, then runs fn's host code with the stream operations compared with the
// capture but not issued; a difference is an error (the graph's operations ran instead of the step's) and
// turns graphs off.
func (g *StepGraph) replayTrusted(fn func() error) error {
	b := g.b
	b.mu.Lock()
	if err := g.launchLocked(nil); err != nil {
		b.mu.Unlock()
		return err
	}
	b.graph, b.gstate = g, graphTrusted
	g.pos, g.diverged = 0, ""
	b.mu.Unlock()
	ferr := fn()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.graph, b.gstate = nil, graphEager
	g.Replays++
	if g.diverged == "" && ferr == nil && g.pos != len(g.trace) {
		g.diverged = fmt.Sprintf("the step issued %d stream operations, its graph %d", g.pos, len(g.trace))
	}
	if g.diverged != "" {
		g.off = "a replayed step differed from its capture: " + g.diverged
		g.Mismatch = g.diverged
		g.dropGraph() // the slots stay until Close: the graph may still read them
		return fmt.Errorf("cuda: a training step differed from the CUDA graph replayed for it (%s): the graph's operations ran instead of the step's; graphs are off now", g.diverged)
	}
	return ferr
}

// setKernel points a kernel node of the executable graph at k's arguments (copied by the driver).
func (g *StepGraph) setKernel(node C.CUgraphNode, k *kernelLaunch) error {
	var vals []byte
	n := 1
	if k.blob != nil {
		vals = k.blob
	} else {
		n = len(k.args)
		vals = argBytes(k.args)
	}
	if len(vals) == 0 {
		vals = make([]byte, 8)
	}
	cv := C.CBytes(vals)
	defer C.free(cv)
	ptrs := (*[1 << 16]unsafe.Pointer)(C.malloc(C.size_t(max(n, 1)) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(ptrs))
	for i := 0; i < n; i++ {
		if k.blob != nil {
			ptrs[i] = cv
		} else {
			ptrs[i] = unsafe.Add(cv, 8*i)
		}
	}
	rc := C.tc_set_kernel(g.exec, node, k.fn, C.uint(k.gx), C.uint(k.gy), C.uint(k.gz), C.uint(k.bx), C.uint(k.by),
		C.uint(k.smem), (*unsafe.Pointer)(unsafe.Pointer(ptrs)))
	if rc != 0 {
		return driverErrCode("cuGraphExecKernelNodeSetParams", int(rc), "updating a kernel of the step graph")
	}
	return nil
}

// recaptureLocked drops the graph so that the next step captures again.
func (g *StepGraph) recaptureLocked() {
	g.dropGraph()
	g.steps = g.warmup + 1 // the next Run captures (the probe already passed)
}

// flushLocked issues the recorded operations of the replaying step eagerly, in order, and marks the rest of
// the step eager.
func (g *StepGraph) flushLocked() error {
	ops := g.current
	g.current = nil
	g.broken = true
	for _, c := range ops {
		if err := c.run(); err != nil {
			return err
		}
	}
	return nil
}

// issue runs or records one stream operation of op o: key (called only while a graph captures or replays)
// identifies it apart from a kernel's arguments (for kernel launches, k holds them and tells how to update
// the node), data is an upload's bytes (nil otherwise). It returns run's error when the operation is issued now.
func (o *op) issue(key func() []byte, k *kernelLaunch, data []byte, run func() error) error {
	b := o.b
	g := b.graph
	switch {
	case g == nil || b.gstate == graphEager || b.gstate == graphProbing:
		return run()
	case b.gstate == graphTrusted:
		g.compareTrusted(o.name, key, k, data)
		return nil
	case b.gstate == graphCapturing:
		s := streamOp{key: key(), kern: k, slot: -1}
		if data != nil { // the graph copies from the upload's slot; launchLocked fills it
			off := (g.slotUsed + 255) &^ 255
			if off+len(data) > g.slotCap {
				return fmt.Errorf("cuda: the captured step uploads more than the probe step did (%d bytes of slots, at %s)", g.slotCap, o.name)
			}
			g.slotUsed = off + len(data)
			s.slot, s.data = off, data
			dst := binaryDst(s.key)
			run = func() error {
				return driverErr("cuMemcpyDtoDAsync", cu.MemcpyDtoDAsync(cu.DevicePtr(dst), g.slots+cu.DevicePtr(off), int64(len(data)), b.stream), "%d bytes from a graph's upload slot", len(data))
			}
		}
		if err := run(); err != nil {
			return err
		}
		if k != nil {
			if rc := C.tc_last_node(streamHandle(b.stream), &s.node); rc != 0 {
				return driverErrCode("cuStreamGetCaptureInfo", int(rc), "the node of "+o.name)
			}
		}
		g.trace = append(g.trace, s)
		return nil
	}
	// replaying
	if g.broken {
		return run()
	}
	kb := key()
	if g.pos >= len(g.trace) || !bytes.Equal(g.trace[g.pos].key, kb) {
		if g.pos >= len(g.trace) {
			g.Mismatch = fmt.Sprintf("%s: more stream operations than the captured step's %d", o.name, len(g.trace))
		} else {
			g.Mismatch = fmt.Sprintf("%s: stream operation %d differs from the captured step's", o.name, g.pos)
		}
		g.recaptureLocked()
		if err := g.flushLocked(); err != nil {
			return err
		}
		return run()
	}
	c := streamOp{key: kb, kern: k, run: run, slot: -1, data: data}
	if data != nil {
		c.slot = g.trace[g.pos].slot
	}
	g.current = append(g.current, c)
	g.pos++
	return nil
}

// compareTrusted compares one stream operation of a trusted replay with the capture's (see replayTrusted).
func (g *StepGraph) compareTrusted(name string, key func() []byte, k *kernelLaunch, data []byte) {
	if g.diverged != "" {
		return
	}
	if g.pos >= len(g.trace) {
		g.diverged = fmt.Sprintf("%s: more stream operations than the captured step's %d", name, len(g.trace))
		return
	}
	t := &g.trace[g.pos]
	var same bool
	switch {
	case k != nil:
		same = k.same(t.kern)
	case data != nil:
		same = t.slot >= 0 && bytes.Equal(t.data, data) && bytes.Equal(t.key, key())
	default:
		same = t.kern == nil && t.slot < 0 && bytes.Equal(t.key, key())
	}
	if !same {
		g.diverged = fmt.Sprintf("%s: stream operation %d differs from the captured step's", name, g.pos)
	}
	g.pos++
}

// binaryDst reads the destination address of an upload's key ("htod <dst> <n>").
func binaryDst(key []byte) uint64 {
	var dst uint64
	var n int
	fmt.Sscanf(string(key), "htod %x %d", &dst, &n)
	return dst
}

// hostToDevice copies n bytes from host to device address dst on the stream. Inside a captured step the
// graph copies them from a slot the bytes are uploaded to before each launch (see above).
func (o *op) hostToDevice(dst uint64, host unsafe.Pointer, n int, what string) error {
	b := o.b
	if n == 0 {
		return nil
	}
	b.htodBytes += n + 256 // the probe sizes the slots of a capture by it (aligned)
	if b.graph == nil {    // through the page-locked ring (staging.go), else directly from pageable memory
		if staged, err := b.stageUpload(dst, host, n, what); staged {
			return err
		}
		return driverErr("cuMemcpyHtoDAsync", cu.MemcpyHtoDAsync(cu.DevicePtr(dst), host, int64(n), b.stream), "%d bytes (%s)", n, what)
	}
	data := C.GoBytes(host, C.int(n)) // the caller's memory may be gone when a mismatch issues the copy later
	return o.issue(func() []byte { return fmt.Appendf(nil, "htod %x %d", dst, n) }, nil, data, func() error {
		if staged, err := b.stageUpload(dst, unsafe.Pointer(&data[0]), n, what); staged {
			return err
		}
		return driverErr("cuMemcpyHtoDAsync", cu.MemcpyHtoDAsync(cu.DevicePtr(dst), unsafe.Pointer(&data[0]), int64(n), b.stream), "%d bytes (%s)", n, what)
	})
}

// kernelKey is the identity of a kernel launch apart from its arguments.
func kernelKey(fn unsafe.Pointer, gx, gy, gz, bx, by, smem int) []byte {
	return fmt.Appendf(nil, "kernel %p %d %d %d %d %d %d", fn, gx, gy, gz, bx, by, smem)
}

// argBytes packs 8-byte kernel arguments.
func argBytes(args []uint64) []byte {
	out := make([]byte, 8*len(args))
	for i, a := range args {
		for j := 0; j < 8; j++ {
			out[8*i+j] = byte(a >> (8 * j))
		}
	}
	return out
}

// stream issues a stream operation that a graph cannot update (a fill, a device copy, a GEMM): key returns
// all of its arguments (built only while a graph captures or replays).
func (o *op) stream(key func() []byte, run func() error) error {
	if o.b.graph == nil {
		return run()
	}
	return o.issue(key, nil, nil, run)
}

// syncCheck is called before a host wait: a captured step cannot wait (the error names the op), a replaying
// step issues what it recorded first, then runs eagerly, and a trusted replay (its graph launched) fails.
func (o *op) syncCheck() error {
	b := o.b
	g := b.graph
	if g == nil {
		return nil
	}
	switch b.gstate {
	case graphCapturing:
		return fmt.Errorf("cuda: %s waits for the device inside a captured training step", o.name)
	case graphTrusted:
		if g.diverged == "" {
			g.diverged = o.name + " waits for the device"
		}
		return fmt.Errorf("cuda: %s waits for the device inside a replayed training step", o.name)
	case graphReplaying:
		if !g.broken {
			g.Mismatch = o.name + " waits for the device"
			g.recaptureLocked()
			return g.flushLocked()
		}
	}
	return nil
}

// NewStepGraph returns a StepGraph for the training steps run on b (a CUDA backend), with warmup eager steps
// first; it errors for another backend.
func NewStepGraph(b tensor.Backend, warmup int) (*StepGraph, error) {
	cb, ok := b.(*Backend)
	if !ok {
		return nil, fmt.Errorf("cuda: CUDA graphs need a CUDA backend, got %s", b.Name())
	}
	return cb.NewStepGraph(warmup), nil
}

// SetPhiloxBase sets the Philox base of the next steps on g's Backend (Backend.SetPhiloxBase): call it
// before Run with the dropout offset of the step's first micro-batch, so that every step launches the same
// kernel arguments.
func (g *StepGraph) SetPhiloxBase(base uint64) error { return g.b.SetPhiloxBase(base) }
