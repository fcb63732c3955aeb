//go:build cuda

package cuda

import (
	"math"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/tune-ml/tune/tensor"
)

// ptrOf returns the address of a non-empty slice's first element for a host↔device copy.
func ptrOf[E any](s []E) unsafe.Pointer { return unsafe.Pointer(&s[0]) }

// Embedding gathers out (N, C) = table (V, C)[ids (N)] with ids I32 or I64; out may be any float dtype
// (values are rounded to it). The ids are checked on the host first (Upload's copy, whose range is known
// without a scan, else a download that waits): an id outside [0, V) is an ErrArgument naming its position,
// and nothing is written then.
func (b *Backend) Embedding(out, ids, table *tensor.Tensor) (err error) {
	o := b.begin("Embedding", out, ids, table)
	defer o.end(&err)
	o.float("out", out).index("ids", ids).float("table", table)
	v, ch := o.rows("table", table)
	if o.failed() {
		return
	}
	o.numel("out", out, ids.Numel()*ch)
	o.checkIDs("ids", ids, v)
	if o.failed() || ch == 0 {
		return
	}
	n := ids.Numel()
	vv := vec(out, table)
	if ch%4 != 0 {
		vv = 0
	}
	per := ch // threads: a group of four columns each (vec), else a column each
	if vv == 1 {
		per = (ch + 3) / 4
	}
	threads := min(256, max(32, (per+31)/32*32))
	o.launch("index.cu", "embedding_fwd", (n+embRowsPerBlock-1)/embRowsPerBlock, 1, threads, 1, addr(out), dt(out), addr(ids), dt(ids),
		addr(table), dt(table), i64(n), i64(ch), vv)
	return
}

// embRowsPerBlock is EMB_U of kernels/index.cu: the output rows one block of embedding_fwd gathers.
const embRowsPerBlock = 4

// EmbeddingBackward scatter-adds dtable (V, C) += dout (N, C) rows at ids (N), in FP32, each touched table row
// rounded once. The ids are checked on the host (Upload's copy, else a download that waits); the token rows
// are grouped by id (ids ascending, token order inside a group) and the groups cut into work items of
// consecutive rows, by kernels (embeddingBackwardDevice, up to embDeviceMaxRows rows) or on the host (a
// stable counting sort, uploaded), so the kernels need no atomics and the result is the same on every run
// (see embeddingItems for the summation order; for an F32 table and groups of at most 32 rows it is
// tensor/cpu's, bit for bit).
func (b *Backend) EmbeddingBackward(dtable, ids, dout *tensor.Tensor) (err error) {
	o := b.begin("EmbeddingBackward", dtable, ids, dout)
	defer o.end(&err)
	o.float("dtable", dtable).index("ids", ids).float("dout", dout)
	v, ch := o.rows("dtable", dtable)
	if o.failed() {
		return
	}
	o.numel("dout", dout, ids.Numel()*ch)
	n := ids.Numel()
	if n <= embDeviceMaxRows && !embHostPlan {
		o.checkIDs("ids", ids, v)
		if o.failed() || ch == 0 || n == 0 {
			return
		}
		o.embeddingBackwardDevice(dtable, ids, dout, v, ch, n)
		return
	}
	idx := o.indices("ids", ids, v, nil)
	if o.failed() || ch == 0 || len(idx) == 0 {
		return
	}
	it := embeddingItems(idx, v)
	items, merges := len(it.items)/4, len(it.merges)/3
	host := make([]int32, 0, 2+len(it.items)+len(it.merges)+len(it.rows))
	host = append(append(append(append(host, int32(items), int32(merges)), it.items...), it.merges...), it.rows...)
	dev := o.scratch(4 * len(host))
	var part cu.DevicePtr
	if it.slots > 0 {
		part = o.scratch(4 * it.slots * ch)
	}
	if o.failed() {
		return
	}
	defer o.release(dev)
	if part != 0 {
		defer o.release(part)
	}
	if o.fail(o.hostToDevice(uint64(dev), ptrOf(host), 4*len(host), "embedding groups")) != nil {
		return
	}
	counts := uint64(dev)
	pi := counts + 8
	pm := pi + uint64(4*len(it.items))
	pr := pm + uint64(4*len(it.merges))
	o.embeddingScatter(dtable, dout, uint64(part), pi, pr, pm, counts, ch, items, merges)
	return
}

// embeddingScatter queues the plan's sums (embedding_bwd_rows over at most maxItems items, then
// embedding_bwd_merge over at most maxMerges split groups; the kernels read the actual counts at counts and
// counts+4) for either planner.
func (o *op) embeddingScatter(dtable, dout *tensor.Tensor, part, items, rows, merges, counts uint64, ch, maxItems, maxMerges int) {
	vv := vec(dtable, dout)
	if ch%4 != 0 {
		vv = 0
	}
	threads := min(256, max(32, ((ch+3)/4+31)/32*32))
	o.launch("index.cu", "embedding_bwd_rows", min(maxItems, 16*o.b.sms*8), 1, threads, 1, addr(dtable), dt(dtable), addr(dout), dt(dout),
		part, items, rows, i64(ch), vv, counts)
	if maxMerges > 0 {
		o.launch("index.cu", "embedding_bwd_merge", min(maxMerges, 16*o.b.sms), 1, threads, 1, addr(dtable), dt(dtable), part, merges, i64(ch), vv, counts+4)
	}
}

// embHostPlan makes EmbeddingBackward build its plan on the host whatever the row count (the tests compare
// it with the device's).
var embHostPlan = false

// embDeviceMaxRows bounds the rows for which EmbeddingBackward plans on the device (embeddingBackwardDevice):
// emb2_compact reads every id once per group of more than 32 rows, at most rows/33 groups.
const embDeviceMaxRows = 1 << 17

// embeddingBackwardDevice queues EmbeddingBackward with its plan built by kernels (index.cu's emb2_*): the
// host plan's items, merges and slots (embeddingWork), so the same additions in the same order, with no host
// work on the ids and nothing uploaded. Scratch: int32 counts and offsets per id, the rows, the items
// (at most one per row), the merges (at most one per 33 rows) and the FP32 partial rows.
func (o *op) embeddingBackwardDevice(dtable, ids, dout *tensor.Tensor, v, ch, n int) {
	maxMerges := n/33 + 1
	maxSlots := n/32 + maxMerges // ⌈g/32⌉ ≤ g/32 + 1 slots for a split group of g rows
	// int32 words: cnt, fill (zeroed), start (v+1), itemOff, slotOff, mergeOff, big, tot (4), rows, items, merges
	offs := []int{0, v, 2 * v, 3*v + 1, 4*v + 1, 5*v + 1, 6*v + 1, 6*v + 1 + maxMerges, 6*v + 5 + maxMerges,
		6*v + 5 + maxMerges + n, 6*v + 5 + maxMerges + 5*n}
	words := offs[10] + 3*maxMerges
	ints := o.scratch(4 * words)
	part := o.scratch(4 * maxSlots * ch)
	if o.failed() {
		return
	}
	defer o.release(ints)
	defer o.release(part)
	at := func(k int) uint64 { return uint64(ints) + uint64(4*offs[k]) }
	cnt, fill, start, itemOff, slotOff, mergeOff, big, tot, rows, items, merges := at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7), at(8), at(9), at(10)
	if o.fail(o.memset32(cnt, 0, 2*v, "embedding counts")) != nil { // through the recorder: graph replays compare it
		return
	}
	gn, gv := o.gridFor(n), o.gridFor(v)
	o.launch("index.cu", "emb2_hist", gn, 1, 256, 1, cnt, addr(ids), dt(ids), i64(n))
	o.launch("index.cu", "emb2_scan", 1, 1, 1024, 1, cnt, start, itemOff, slotOff, mergeOff, big, tot, i64(v))
	o.launch("index.cu", "emb2_place", gn, 1, 256, 1, rows, fill, cnt, start, addr(ids), dt(ids), i64(n))
	o.launch("index.cu", "emb2_sort_small", min((v+7)/8, 4096), 1, 256, 1, rows, cnt, start, i64(v))
	o.launch("index.cu", "emb2_sort_mid", min(maxMerges, 4*o.b.sms), 1, 256, 1, rows, cnt, start, big, tot)
	o.launch("index.cu", "emb2_compact", min(maxMerges, 2*o.b.sms), 1, 1024, 1, rows, start, big, tot, addr(ids), dt(ids), i64(n), cnt)
	o.launch("index.cu", "emb2_items", gv, 1, 256, 1, items, merges, cnt, start, itemOff, slotOff, mergeOff, i64(v))
	o.embeddingScatter(dtable, dout, uint64(part), items, rows, merges, tot, ch, n, maxMerges)
}

// embeddingWork is EmbeddingBackward's plan, built on the host from the ids.
//
// The token rows are grouped by id (ids ascending, token order inside a group) into rows. A group of n rows is
// one work item when n ≤ 32, summed as table + r₀ + r₁ + … in token order (tensor/cpu's order). A larger
// group is cut into consecutive chunks of k = max(32, ⌈√n⌉) rows; item j sums its chunk from zero in token
// order into FP32 partial slot s, and a merge then forms table + p₀ + p₁ + … over the group's chunks in
// order. Every sum is FP32 and the table row is rounded once.
type embeddingWork struct {
	items  []int32 // 4 per item: id, first row index into rows, end, partial slot (-1: add onto the table)
	merges []int32 // 3 per split group: id, first slot, slot count
	rows   []int32 // token row numbers grouped by id
	slots  int     // partial slots (C floats each)
}

func embeddingItems(idx []int, v int) embeddingWork {
	pos := make([]int32, v+1)
	for _, id := range idx {
		pos[id+1]++
	}
	var w embeddingWork
	for id := 0; id < v; id++ {
		lo, n := int(pos[id]), int(pos[id+1])
		if n > 0 {
			if n <= 32 {
				w.items = append(w.items, int32(id), int32(lo), int32(lo+n), -1)
			} else {
				k := max(32, int(math.Ceil(math.Sqrt(float64(n)))))
				first := w.slots
				for a := lo; a < lo+n; a += k {
					w.items = append(w.items, int32(id), int32(a), int32(min(a+k, lo+n)), int32(w.slots))
					w.slots++
				}
				w.merges = append(w.merges, int32(id), int32(first), int32(w.slots-first))
			}
		}
		pos[id+1] += pos[id]
	}
	w.rows = make([]int32, len(idx))
	for n, id := range idx {
		w.rows[pos[id]] = int32(n)
		pos[id]++
	}
	return w
}

// Transpose12 swaps axes 1 and 2: x (a, b, c, d) → out (a, c, b, d), as between (B, T, H, D) and (B, H, T, D).
// Both tensors hold a·b·c·d elements (their own shapes are not consulted); the dtypes may differ (values are
// rounded to out's). out must not overlap x.
func (bk *Backend) Transpose12(out, x *tensor.Tensor, a, b, c, d int) (err error) {
	o := bk.begin("Transpose12", out, x)
	defer o.end(&err)
	o.float("out", out).float("x", x)
	o.that(a >= 0 && b >= 0 && c >= 0 && d >= 0, tensor.ErrArgument, "extents (%d, %d, %d, %d) must be ≥ 0", a, b, c, d)
	n := a * b * c * d
	o.numel("out", out, n).numel("x", x, n)
	if o.failed() || n == 0 {
		return
	}
	v := vec(out, x)
	if d%4 != 0 {
		v = 0
	}
	o.ew("index.cu", "transpose12", a*c*b*((d+3)/4)*4, addr(out), dt(out), addr(x), dt(x), i64(a), i64(b), i64(c), i64(d), v)
	return
}
