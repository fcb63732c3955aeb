//go:build cuda

package cuda

import (
	"maps"

	"github.com/tune-ml/tune/tensor"
)

// A step without host waits.
//
// Every op queues its work and returns; the host waits for the device only where a value must reach it: a
// Download, Synchronize, the scalar-returning reductions, Time, and the index checks of the ops that take ids
// (Embedding, EmbeddingBackward, CrossEntropy, CrossEntropyBackward must fail on an id outside [0, V) before
// writing anything, and EmbeddingBackward plans its deterministic scatter from the ids). A training step that
// downloads its ids only to check them, while the host uploaded them itself a moment before, waits for the
// device once per id-taking op: ten times per BERT step. So Upload keeps a host copy of the I32/I64 values it
// queues (hostIDs), and an id-taking op whose index tensor is exactly such an upload reads the copy instead
// of the device: the same check and the same plan, no wait. A copy is forgotten as soon as anything else may
// have written its bytes: any op other than an id reader that is handed a tensor overlapping them (forgetIDs),
// a Free of its buffer, or the next Upload to the same place, which replaces it. Upload keeps copies with
// unless TUNE_SYNC_FREE=0 (internal/syncfree), and after SetKeepIDs(true).

// hostIDs is the host copy of one Upload of an index tensor: the device bytes [addr, addr+bytes) hold vals.
type hostIDs struct {
	addr     uint64
	bytes    int
	dt       tensor.DType
	vals     []int
	min, max int // the smallest and largest of vals (0, -1 when empty): an in-range check without a scan
}

// idReaders are the ops that only read their index tensors, which therefore keep their host copies.
var idReaders = map[string]bool{"Embedding": true, "EmbeddingBackward": true, "CrossEntropy": true,
	"CrossEntropyBackward": true, "Download": true}

// sync waits for b's stream on behalf of op o and counts the wait.
func (o *op) sync() error {
	if err := o.syncCheck(); err != nil {
		return err
	}
	o.b.countWait(o.name)
	return o.b.stream.Synchronize()
}

// countWait counts one host wait of the op named name (b.mu is held).
func (b *Backend) countWait(name string) { b.waits[name]++ }

// HostWaits returns how many times each op made the host wait for the device since b was opened (a
// cuStreamSynchronize or cuEventSynchronize: Download, Synchronize, the scalar-returning reductions, Time, an
// index check that had no host copy of the ids), by op name. A training step free of host waits adds nothing.
func (b *Backend) HostWaits() map[string]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.waits)
}

// rememberIDs records the host copy of an I32/I64 upload into t (b.mu is held).
func (b *Backend) rememberIDs(t *tensor.Tensor, src any) {
	a, n := addr(t), t.Numel()
	rec := &hostIDs{addr: a, bytes: t.Bytes(), dt: t.DType, vals: make([]int, n)}
	switch s := src.(type) {
	case []int32:
		for i, v := range s {
			rec.vals[i] = int(v)
		}
	case []int64:
		for i, v := range s {
			rec.vals[i] = int(v)
		}
	default:
		return
	}
	rec.min, rec.max = 0, -1
	if n > 0 {
		rec.min, rec.max = rec.vals[0], rec.vals[0]
		for _, v := range rec.vals {
			rec.min, rec.max = min(rec.min, v), max(rec.max, v)
		}
	}
	b.ids[a] = rec
}

// forgetIDs drops the host copies whose bytes op name may write through args (b.mu is held): every copy that
// overlaps an argument, except an id reader's own index tensor.
func (b *Backend) forgetIDs(name string, args []*tensor.Tensor) {
	reader := idReaders[name]
	for _, t := range args {
		bf, ok := live(b, t)
		if !ok {
			continue
		}
		lo := uint64(bf.ptr) + uint64(t.Offset*t.DType.Size())
		hi := lo + uint64(t.Bytes())
		for a, rec := range b.ids {
			if a >= hi || a+uint64(rec.bytes) <= lo {
				continue
			}
			if reader && a == lo && rec.bytes == t.Bytes() && rec.dt == t.DType {
				continue
			}
			delete(b.ids, a)
		}
	}
}

// forgetRange drops the host copies overlapping the device bytes [lo, hi) (b.mu is held).
func (b *Backend) forgetRange(lo, hi uint64) {
	for a, rec := range b.ids {
		if a < hi && a+uint64(rec.bytes) > lo {
			delete(b.ids, a)
		}
	}
}

// hostCopy returns the host copy of index tensor t's values when Upload wrote exactly t and nothing has
// written it since, and nil otherwise.
func (b *Backend) hostCopy(t *tensor.Tensor) []int {
	if rec := b.hostRecord(t); rec != nil {
		return rec.vals
	}
	return nil
}

// hostRecord is hostCopy's record (nil when there is none).
func (b *Backend) hostRecord(t *tensor.Tensor) *hostIDs {
	bf, ok := live(b, t)
	if !ok {
		return nil
	}
	a := uint64(bf.ptr) + uint64(t.Offset*t.DType.Size())
	if rec := b.ids[a]; rec != nil && rec.bytes == t.Bytes() && rec.dt == t.DType && len(rec.vals) == t.Numel() {
		return rec
	}
	return nil
}

// live returns t's buffer when it is a live buffer of b.
func live(b *Backend, t *tensor.Tensor) (*buffer, bool) {
	if t == nil {
		return nil, false
	}
	bf, ok := t.Buf.(*buffer)
	if !ok || bf.b != b || bf.freed {
		return nil, false
	}
	return bf, true
}

// SetKeepIDs sets whether Upload keeps host copies of index tensors so that the id-taking ops need not wait
// (the default unless TUNE_SYNC_FREE=0); turning it off drops the copies kept.
func (b *Backend) SetKeepIDs(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.keepIDs = on
	if !on {
		clear(b.ids)
	}
}
