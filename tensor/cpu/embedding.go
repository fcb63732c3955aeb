package cpu

import (
	"github.com/tune-ml/tune/internal/opcheck"
	"github.com/tune-ml/tune/tensor"
)

// embeddingKernel gathers out (N, C) = table (V, C)[ids] row by row; generic over the element so that a
// same-dtype lookup moves raw bits.
func embeddingKernel[E any](out, table []E, ids []int, c int) {
	for n, id := range ids {
		copy(out[n*c:(n+1)*c], table[id*c:(id+1)*c])
	}
}

// embeddingBackwardKernel scatter-adds dtable (V, C) += dout (N, C) rows at ids (N), in token order.
func embeddingBackwardKernel[T scalar](dtable, dout []T, ids []int, c int) {
	for n, id := range ids {
		axpyKernel(dtable[id*c:(id+1)*c], dout[n*c:(n+1)*c], 1)
	}
}

// indices validates an I32/I64 tensor of ids against [0, v) and returns them as ints; ignore, if non-nil,
// is a value allowed outside the range (CrossEntropy's ignore_index).
func indices(c *check, name string, t *tensor.Tensor, v int, ignore *int) []int {
	if c.Err() != nil {
		return nil
	}
	ids := make([]int, t.Numel())
	if t.DType == tensor.I32 {
		for i, id := range i32Of(t) {
			ids[i] = int(id)
		}
	} else {
		for i, id := range i64Of(t) {
			ids[i] = int(id)
		}
	}
	if c.record(opcheck.IDs(name, ids, v, ignore)).Err() != nil {
		return nil
	}
	return ids
}

// Embedding gathers out (N, C) = table (V, C)[ids (N)] with ids I32 or I64; out may be any float dtype
// (values are rounded to it). An id outside [0, V) is an ErrArgument naming its position; nothing is written
// then.
func (b *Backend) Embedding(out, ids, table *tensor.Tensor) (err error) {
	defer guard(&err, "Embedding", out, ids, table)
	c := newCheck("Embedding", out, ids, table).float("out", out).index("ids", ids).float("table", table)
	v, ch := c.rows("table", table)
	if c.Err() != nil {
		return c.Err()
	}
	c.numel("out", out, ids.Numel()*ch)
	idx := indices(c, "ids", ids, v, nil)
	if c.Err() != nil || ch == 0 {
		return c.Err()
	}
	switch {
	case out.DType == table.DType && table.DType == tensor.F32:
		embeddingKernel(f32Of(out), f32Of(table), idx, ch)
	case out.DType == table.DType:
		embeddingKernel(u16Of(out), u16Of(table), idx, ch)
	case table.DType == tensor.F32:
		rows := make([]float32, len(idx)*ch)
		embeddingKernel(rows, f32Of(table), idx, ch)
		tensor.NarrowHalf(u16Of(out), rows, out.DType)
	default: // half table, other-dtype out: gather the bits, widen exactly, round once to out
		bits := make([]uint16, len(idx)*ch)
		embeddingKernel(bits, u16Of(table), idx, ch)
		o := overwrite(out)
		tensor.WidenHalf(o.V, bits, table.DType)
		o.Store()
	}
	return nil
}

// EmbeddingBackward scatter-adds dtable (V, C) += dout (N, C) rows at ids (N), in token order in FP32; a half
// dtable has each touched row widened, accumulated and rounded once.
func (b *Backend) EmbeddingBackward(dtable, ids, dout *tensor.Tensor) (err error) {
	defer guard(&err, "EmbeddingBackward", dtable, ids, dout)
	c := newCheck("EmbeddingBackward", dtable, ids, dout).float("dtable", dtable).index("ids", ids).float("dout", dout)
	v, ch := c.rows("dtable", dtable)
	if c.Err() != nil {
		return c.Err()
	}
	c.numel("dout", dout, ids.Numel()*ch)
	idx := indices(c, "ids", ids, v, nil)
	if c.Err() != nil || ch == 0 {
		return c.Err()
	}
	dv := load(dout)
	if dtable.DType == tensor.F32 {
		embeddingBackwardKernel(f32Of(dtable), dv, idx, ch)
		return nil
	}
	// Half table: compact the touched rows into FP32 scratch, accumulate there, round each back once.
	slot := make(map[int]int)
	var touched []int
	local := make([]int, len(idx))
	for n, id := range idx {
		s, ok := slot[id]
		if !ok {
			s = len(touched)
			slot[id] = s
			touched = append(touched, id)
		}
		local[n] = s
	}
	bits := u16Of(dtable)
	acc := make([]float32, len(touched)*ch)
	for s, id := range touched {
		tensor.WidenHalf(acc[s*ch:(s+1)*ch], bits[id*ch:(id+1)*ch], dtable.DType)
	}
	embeddingBackwardKernel(acc, dv, local, ch)
	for s, id := range touched {
		tensor.NarrowHalf(bits[id*ch:(id+1)*ch], acc[s*ch:(s+1)*ch], dtable.DType)
	}
	return nil
}
