//go:build cuda

package cuda

import (
	"unsafe"

	"gorgonia.org/cu"

	"github.com/tune-ml/tune/tensor"
)

// ptrOf returns the address of a non-empty slice's first element for a host↔device copy.
func ptrOf[E any](s []E) unsafe.Pointer { return unsafe.Pointer(&s[0]) }

// Embedding gathers out (N, C) = table (V, C)[ids (N)] with ids I32 or I64; out may be any float dtype
// (values are rounded to it). The ids are read on the host first (a synchronization): an id outside [0, V) is
// an ErrArgument naming its position, and nothing is written then.
func (b *Backend) Embedding(out, ids, table *tensor.Tensor) (err error) {
	o := b.begin("Embedding", out, ids, table)
	defer o.end(&err)
	o.float("out", out).index("ids", ids).float("table", table)
	v, ch := o.rows("table", table)
	if o.failed() {
		return
	}
	o.numel("out", out, ids.Numel()*ch)
	o.indices("ids", ids, v, nil)
	if o.failed() || ch == 0 {
		return
	}
	n := ids.Numel()
	vv := vec(out, table)
	if ch%4 != 0 {
		vv = 0
	}
	o.ew("index.cu", "embedding_fwd", n*((ch+3)/4)*4, addr(out), dt(out), addr(ids), dt(ids), addr(table), dt(table), i64(n), i64(ch), vv)
	return
}

// EmbeddingBackward scatter-adds dtable (V, C) += dout (N, C) rows at ids (N), in token order in FP32, each
// touched table row rounded once. The ids are read on the host (a synchronization), grouped by id with a
// counting sort and the groups uploaded, so the kernel needs no atomics and the result is deterministic (for
// an F32 table identical to tensor/cpu).
func (b *Backend) EmbeddingBackward(dtable, ids, dout *tensor.Tensor) (err error) {
	o := b.begin("EmbeddingBackward", dtable, ids, dout)
	defer o.end(&err)
	o.float("dtable", dtable).index("ids", ids).float("dout", dout)
	v, ch := o.rows("dtable", dtable)
	if o.failed() {
		return
	}
	o.numel("dout", dout, ids.Numel()*ch)
	idx := o.indices("ids", ids, v, nil)
	if o.failed() || ch == 0 || len(idx) == 0 {
		return
	}
	// Group token rows by id with a stable counting sort (O(N + V), no per-group allocation): uniq lists the
	// ids present in ascending order, rows[start[u]:start[u+1]] the token rows of uniq[u] in token order.
	pos := make([]int32, v+1)
	for _, id := range idx {
		pos[id+1]++
	}
	var uniq, start []int32
	for id := 0; id < v; id++ {
		if c := pos[id+1]; c > 0 {
			uniq = append(uniq, int32(id))
			start = append(start, pos[id])
		}
		pos[id+1] += pos[id]
	}
	start = append(start, int32(len(idx)))
	rows := make([]int32, len(idx))
	for n, id := range idx {
		rows[pos[id]] = int32(n)
		pos[id]++
	}
	host := make([]int32, 0, len(uniq)+len(start)+len(rows))
	host = append(append(append(host, uniq...), start...), rows...)
	dev := o.scratch(4 * len(host))
	if o.failed() {
		return
	}
	defer o.release(dev)
	if o.fail(driverErr("cuMemcpyHtoDAsync", cu.MemcpyHtoDAsync(dev, ptrOf(host), int64(4*len(host)), b.stream), "embedding groups")) != nil {
		return
	}
	pu := uint64(dev)
	ps := pu + uint64(4*len(uniq))
	pr := ps + uint64(4*len(start))
	o.launch("index.cu", "embedding_bwd", len(uniq), (ch+255)/256, 256, 1, addr(dtable), dt(dtable), addr(dout), dt(dout), pu, ps, pr, i64(ch))
	return
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
