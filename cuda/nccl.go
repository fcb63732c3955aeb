//go:build cuda

package cuda

// #include <stdlib.h>
// #include "tunecuda.h"
import "C"

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/tune-ml/tune/tensor"
)

// libNCCL is NCCL, opened at run time like cuBLASLt (library.load: TUNE_NCCL names a file, else
// $CUDA_HOME/lib64, $CUDA_PATH/lib64, the loader's search with LD_LIBRARY_PATH, /usr/local/cuda/lib64).
var libNCCL = &library{
	name:     "nccl",
	sonames:  []string{"libnccl.so.2"},
	override: "TUNE_NCCL",
	bind: func(h unsafe.Pointer) error {
		if missing := C.tc_nccl_bind(h); missing != nil {
			return fmt.Errorf("symbol %s is missing (NCCL 2.x is needed)", C.GoString(missing))
		}
		return nil
	},
}

// NCCLVersion opens NCCL and returns the file loaded and its version code (ncclGetVersion: 22803 for 2.28.3).
func NCCLVersion() (path string, version int, err error) {
	if path, err = libNCCL.load(); err != nil {
		return "", 0, err
	}
	var v C.int
	if st := C.tc_nccl_version(&v); st != 0 {
		return path, 0, ncclError("ncclGetVersion", int(st), nil, "")
	}
	return path, int(v), nil
}

// ncclError is a failed NCCL call as an *Error whose Status is NCCL's own string (ncclGetErrorString) and
// whose Detail adds ncclGetLastError's message when there is one.
func ncclError(call string, code int, comm C.tc_nccl_comm, detail string) error {
	e := &Error{Call: call, Code: code, Status: C.GoString(C.tc_nccl_error(C.int(code))), Detail: detail}
	if last := C.GoString(C.tc_nccl_last_error(comm)); last != "" {
		if e.Detail != "" {
			e.Detail += ": "
		}
		e.Detail += last
	}
	return e
}

// NewUniqueID opens NCCL and makes the id of a new communicator (ncclGetUniqueId). Call it on one rank only.
func NewUniqueID() (UniqueID, error) {
	var id UniqueID
	if _, err := libNCCL.load(); err != nil {
		return id, err
	}
	var cid C.tc_nccl_unique_id
	if st := C.tc_nccl_get_unique_id(&cid); st != 0 {
		return id, ncclError("ncclGetUniqueId", int(st), nil, "")
	}
	id = *(*UniqueID)(unsafe.Pointer(&cid))
	return id, nil
}

// Comm is one rank's NCCL communicator, bound to a CUDA Backend: its collectives are queued on the backend's
// stream, after the ops queued before them.
type Comm struct {
	b       *Backend
	comm    C.tc_nccl_comm
	rank    int
	nranks  int
	aborted atomic.Bool // set by Abort or Close
}

// NewComm joins the communicator id as rank of nranks on backend b (which must be a CUDA backend); it blocks
// until every rank has joined (ncclCommInitRank, collective).
func NewComm(b tensor.Backend, id UniqueID, nranks, rank int) (c *Comm, err error) {
	cb, ok := b.(*Backend)
	if !ok {
		return nil, fmt.Errorf("cuda: NewComm needs a CUDA backend, got %s", b.Name())
	}
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("cuda: NewComm: rank %d of %d ranks is out of range (0 ≤ rank < nranks)", rank, nranks)
	}
	if _, err := libNCCL.load(); err != nil {
		return nil, err
	}
	o := cb.begin("NCCLCommInitRank")
	defer o.end(&err)
	if o.failed() {
		return nil, o.err
	}
	h, err := initRank(id, nranks, rank, cb.Name())
	if o.fail(err) != nil {
		return nil, o.err
	}
	return &Comm{b: cb, comm: h, rank: rank, nranks: nranks}, nil
}

// initRank calls ncclCommInitRank in the current CUDA context (NCCL takes the id by value; the shim
// dereferences the pointer).
func initRank(id UniqueID, nranks, rank int, where string) (C.tc_nccl_comm, error) {
	var h C.tc_nccl_comm
	cid := (*C.tc_nccl_unique_id)(unsafe.Pointer(&id))
	if st := C.tc_nccl_comm_init_rank(&h, C.int(nranks), cid, C.int(rank)); st != 0 {
		return nil, ncclError("ncclCommInitRank", int(st), nil, fmt.Sprintf("rank %d of %d on %s", rank, nranks, where))
	}
	return h, nil
}

// Rank returns this communicator's rank.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks.
func (c *Comm) Size() int { return c.nranks }

// ncclType maps a tensor dtype to ncclDataType_t (nccl.h: ncclFloat16 6, ncclFloat32 7, ncclBfloat16 9).
func ncclType(d tensor.DType) (int, bool) {
	switch d {
	case tensor.F32:
		return 7, true
	case tensor.F16:
		return 6, true
	case tensor.BF16:
		return 9, true
	}
	return 0, false
}

// AllReduce reduces each tensor in place across the ranks with op (Sum, Max or Avg), queued on the backend's stream; several
// tensors are launched as one NCCL group (ncclGroupStart/End), as one bucket. Every rank must call it with the
// same tensors' sizes and dtypes in the same order.
func (c *Comm) AllReduce(op ReduceOp, ts ...*tensor.Tensor) (err error) {
	if c.aborted.Load() {
		return fmt.Errorf("cuda: AllReduce on rank %d: the communicator was aborted", c.rank)
	}
	o := c.b.begin("AllReduce", ts...)
	defer o.end(&err)
	for i, t := range ts {
		o.float(fmt.Sprintf("t[%d]", i), t)
	}
	if o.failed() {
		return nil
	}
	if op != Sum && op != Avg && op != Max {
		o.fail(fmt.Errorf("reduction %d is not supported (Sum, Max or Avg)", int(op)))
		return nil
	}
	if len(ts) > 1 {
		if st := C.tc_nccl_group_start(); st != 0 {
			o.fail(ncclError("ncclGroupStart", int(st), c.comm, ""))
			return nil
		}
	}
	stream := streamHandle(c.b.stream)
	var first error
	for _, t := range ts {
		nt, _ := ncclType(t.DType)
		p := C.uintptr_t(addr(t))
		if st := C.tc_nccl_all_reduce(p, p, C.size_t(t.Numel()), C.int(nt), C.int(op), c.comm, stream); st != 0 && first == nil {
			first = ncclError("ncclAllReduce", int(st), c.comm, fmt.Sprintf("rank %d, %d × %s", c.rank, t.Numel(), t.DType))
		}
	}
	if len(ts) > 1 {
		if st := C.tc_nccl_group_end(); st != 0 && first == nil {
			first = ncclError("ncclGroupEnd", int(st), c.comm, fmt.Sprintf("rank %d", c.rank))
		}
	}
	o.fail(first)
	return nil
}

// AsyncError polls ncclCommGetAsyncError: nil while the communicator is healthy, else NCCL's error (a peer
// died, a network failure). A rank waiting on a collective whose peer is gone would hang, so the caller polls
// this from another goroutine and calls Abort when it fails.
func (c *Comm) AsyncError() error {
	if c.aborted.Load() {
		return nil
	}
	var e C.int
	if st := C.tc_nccl_comm_get_async_error(c.comm, &e); st != 0 {
		return ncclError("ncclCommGetAsyncError", int(st), c.comm, fmt.Sprintf("rank %d", c.rank))
	}
	if e != 0 {
		return ncclError("ncclCommGetAsyncError", int(e), c.comm, fmt.Sprintf("rank %d: asynchronous error", c.rank))
	}
	return nil
}

// Abort ends the communicator at once, cancelling the collectives in flight (ncclCommAbort); it takes no lock
// (NCCL allows it from another thread), so it can end a rank blocked in a collective. The Comm is unusable afterwards.
func (c *Comm) Abort() error {
	if c.aborted.Swap(true) {
		return nil
	}
	if st := C.tc_nccl_comm_abort(c.comm); st != 0 {
		return ncclError("ncclCommAbort", int(st), nil, fmt.Sprintf("rank %d", c.rank))
	}
	return nil
}

// Close waits for the communicator's work and frees it (ncclCommDestroy).
func (c *Comm) Close() error {
	if c.aborted.Swap(true) {
		return nil
	}
	if st := C.tc_nccl_comm_destroy(c.comm); st != 0 {
		return ncclError("ncclCommDestroy", int(st), nil, fmt.Sprintf("rank %d", c.rank))
	}
	return nil
}
