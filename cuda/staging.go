//go:build cuda

package cuda

/*
#include <cuda.h>
#include <string.h>

static int tc_staging_alloc(void **p, size_t n) { return (int)cuMemAllocHost(p, n); }
*/
import "C"

import (
	"unsafe"

	"gorgonia.org/cu"
)

// Upload staging.
//
// cuMemcpyHtoDAsync from pageable memory is synchronous with respect to the host and the driver may
// synchronize with the stream to stage the bytes (CUDA Runtime API documentation, "API synchronization
// behavior", memcpy: "If pageable memory must first be staged to pinned memory, the driver may synchronize
// with the stream and stage the copy into pinned memory"); a training step's uploads (ids, masks, labels)
// would then keep the host from queueing the next step while the device works, and the device copies from
// pageable memory at a fraction of the bus speed. So eager uploads go through a ring of page-locked memory:
// the caller's bytes are copied into the ring on the host (the caller may reuse its slice at once, as before),
// the copy is queued from there, and an event recorded after it tells when that part of the ring may be
// written again. The host waits only when it has queued a whole ring's worth of uploads that the device has
// not reached yet (counted as an "Upload" host wait). Uploads larger than half the ring, and captured or
// replayed steps (graph.go stages those itself), take the direct path.

// stagingBytes is the size of the page-locked upload ring: a BERT-base 64×512 step uploads ~0.5 MiB, a
// decoder's 8×2048 ~0.2 MiB, so the ring holds many steps' uploads ahead of the device.
const stagingBytes = 8 << 20

// stagingAlign is the alignment of each upload in the ring.
const stagingAlign = 256

// stagedCopy is one queued copy out of the ring: bytes [start, end) and the event recorded after it.
type stagedCopy struct {
	start, end int
	done       cu.Event
}

// stagingRing is the page-locked ring; the zero value allocates on first use.
type stagingRing struct {
	base    unsafe.Pointer // nil until first use; stays nil (direct copies) if the allocation failed
	failed  bool           // cuMemAllocHost failed once: stop trying
	head    int            // where the next upload goes
	pending []stagedCopy   // copies not known to be done, oldest first
	free    []cu.Event     // events of finished copies, for reuse
}

// stageUpload queues the n-byte copy from host to dst through the ring and reports whether it did; false
// means the caller must copy directly (ring unavailable or n too large). b.mu is held.
func (b *Backend) stageUpload(dst uint64, host unsafe.Pointer, n int, what string) (bool, error) {
	r := &b.staging
	if r.failed || n > stagingBytes/2 {
		return false, nil
	}
	if r.base == nil {
		var p unsafe.Pointer
		if rc := C.tc_staging_alloc(&p, C.size_t(stagingBytes)); rc != 0 {
			r.failed = true // without page-locked memory uploads stay correct, only slower
			return false, nil
		}
		r.base = p
	}
	for len(r.pending) > 0 && r.pending[0].done.Query() == nil { // finished copies give their events back
		r.free = append(r.free, r.pending[0].done)
		r.pending = r.pending[1:]
	}
	off := r.head
	if off+n > stagingBytes {
		off = 0
	}
	if err := r.reclaim(b, off, off+n); err != nil {
		return true, err
	}
	p := unsafe.Add(r.base, off)
	C.memcpy(p, host, C.size_t(n))
	if err := cu.MemcpyHtoDAsync(cu.DevicePtr(dst), p, int64(n), b.stream); err != nil {
		return true, driverErr("cuMemcpyHtoDAsync", err, "%d bytes (%s)", n, what)
	}
	ev, err := r.event()
	if err != nil {
		return true, driverErr("cuEventCreate", err, "upload staging (%s)", what)
	}
	if err := ev.Record(b.stream); err != nil {
		return true, driverErr("cuEventRecord", err, "upload staging (%s)", what)
	}
	r.pending = append(r.pending, stagedCopy{start: off, end: off + n, done: ev})
	r.head = (off + n + stagingAlign - 1) &^ (stagingAlign - 1)
	return true, nil
}

// reclaim makes bytes [start, end) of the ring writable: the copies out of them must be done. Copies finish
// in stream order, so waiting for the newest overlapping one finishes every older one too.
func (r *stagingRing) reclaim(b *Backend, start, end int) error {
	last := -1
	for i, c := range r.pending {
		if c.start < end && start < c.end {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	ev := r.pending[last].done
	if ev.Query() != nil { // not done yet (or an error, which Synchronize reports)
		b.countWait("Upload")
		if err := ev.Synchronize(); err != nil {
			return driverErr("cuEventSynchronize", err, "upload staging")
		}
	}
	for _, c := range r.pending[:last+1] {
		r.free = append(r.free, c.done)
	}
	r.pending = append(r.pending[:0], r.pending[last+1:]...)
	return nil
}

// event returns an unused event, from the finished copies' or a new one.
func (r *stagingRing) event() (cu.Event, error) {
	if n := len(r.free); n > 0 {
		e := r.free[n-1]
		r.free = r.free[:n-1]
		return e, nil
	}
	return cu.MakeEvent(cu.DisableTiming)
}
