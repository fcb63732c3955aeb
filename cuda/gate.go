//go:build cuda

package cuda

/*
#include <cuda.h>

static int tc_gate_alloc(void **p) { return (int)cuMemAllocHost(p, 64); }
*/
import "C"

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"gorgonia.org/cu"
)

// gateTimeout is how long the gate waits for the host to release it (kernels/gate.cu). An op that makes the host
// wait for the stream (Download, a scalar-returning reduction) cannot release it while it waits; after the
// timeout the gate lets the stream go on, and the op's device time still starts at the gate's end.
const gateTimeout = 5 * time.Millisecond

// gateWord is TimeGated's page-locked host memory: word 0 the flag the gate kernel waits on, word 1 its
// timed-out mark. Pinned memory from cuMemAllocHost is device-accessible at its host address under unified
// addressing (CUDA Driver API, "Unified Addressing"), which every 64-bit platform tune runs on has.
type gateWord struct {
	p   unsafe.Pointer // nil until first use
	seq uint32         // the value the last gate waited for
}

func (g *gateWord) flag() *uint32     { return (*uint32)(g.p) }
func (g *gateWord) timedOut() *uint32 { return (*uint32)(unsafe.Add(g.p, 4)) }

// TimeGated runs fn, which queues ops on b, and returns the device time of the work fn queued, in milliseconds,
// and the host time fn took to queue it. Unlike Time, the device starts on fn's work only once fn has returned:
// a one-thread kernel (kernels/gate.cu) holds the stream until the host releases it, and the start event is
// recorded behind it, so host work between fn's launches (validation, work lists, launch calls) is not in
// the device time. This is the device time a profiler's kernel trace shows, the time an op costs in a step
// whose host runs ahead of the device. timedOut reports that fn made the host wait for the stream before
// returning, so that the gate let the stream go after gateTimeout; the device time then includes the host's
// work after the wait. It waits for the end event. Eager steps only (not inside a graph's capture or replay).
func (b *Backend) TimeGated(fn func() error) (deviceMS, hostMS float64, timedOut bool, err error) {
	b.mu.Lock()
	inGraph := b.graph != nil
	b.mu.Unlock()
	if inGraph {
		return 0, 0, false, fmt.Errorf("cuda: TimeGated inside a CUDA graph's capture or replay; time the step eagerly")
	}
	var start, stop cu.Event
	defer func() {
		for _, e := range []*cu.Event{&start, &stop} {
			if *e != (cu.Event{}) {
				cu.DestroyEvent(e)
			}
		}
	}()
	record := func(ev *cu.Event, what string, gate bool) (rerr error) {
		o := b.begin("TimeGated")
		defer o.end(&rerr)
		g := &b.gate
		if gate {
			if g.p == nil {
				var p unsafe.Pointer
				if rc := C.tc_gate_alloc(&p); rc != 0 {
					return driverErrCode("cuMemAllocHost", int(rc), "64 bytes for the timing gate")
				}
				g.p = p
			}
			g.seq++
			atomic.StoreUint32(g.timedOut(), 0)
			o.launch("gate.cu", "gate_wait", 1, 1, 1, 1, uint64(uintptr(g.p)), uint64(g.seq), uint64(gateTimeout.Nanoseconds()),
				uint64(uintptr(g.p))+4)
			if o.failed() {
				return o.err
			}
		}
		e, cerr := cu.MakeEvent(cu.DefaultEvent)
		if o.fail(driverErr("cuEventCreate", cerr, "%s", what)) != nil {
			return
		}
		*ev = e
		o.fail(driverErr("cuEventRecord", e.Record(b.stream), "%s", what))
		return
	}
	release := func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		atomic.StoreUint32(b.gate.flag(), b.gate.seq)
	}
	if err := record(&start, "start", true); err != nil {
		return 0, 0, false, err
	}
	t0 := time.Now()
	ferr := fn()
	hostMS = float64(time.Since(t0).Nanoseconds()) / 1e6
	if ferr != nil {
		release()
		return 0, 0, false, ferr
	}
	rerr := record(&stop, "stop", false)
	release()
	if rerr != nil {
		return 0, 0, false, rerr
	}
	o := b.begin("TimeGated")
	defer o.end(&err)
	b.countWait("TimeGated")
	if o.fail(driverErr("cuEventSynchronize", stop.Synchronize(), "stop")) != nil {
		return 0, 0, false, o.err
	}
	ms, eerr := start.Elapsed(stop)
	return ms, hostMS, atomic.LoadUint32(b.gate.timedOut()) != 0, o.fail(driverErr("cuEventElapsedTime", eerr, ""))
}
