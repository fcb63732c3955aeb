package amp

import (
	"fmt"

	"github.com/tune-ml/tune/tensor"
)

// WeightCache casts FP32 master weights to the autocast dtype once and hands out the same half-precision copy
// to every use until Invalidate (PyTorch's autocast weight-cast cache, torch/amp/autocast_mode.py, which is
// cleared when the outermost autocast context exits). The cache cannot see writes to a master weight: its owner
// must Invalidate whenever a weight may have changed. tune's models invalidate at the start of every Forward
// unless the caller promises nothing changed (transformer.ForwardOptions.ReuseWeightCasts: the micro-batches
// of one accumulation window, the batches of one evaluation), so each weight is cast once per optimizer step in
// training and no public path sees a stale copy. The copies are allocated on first use and reused for the rest
// of training, so a steady-state step allocates nothing.
//
// With SetFlat, the weights that are views of one flat F32 buffer (a model's trainable parameters) share one
// half copy of the whole buffer, cast in one Cast per step instead of one per weight (SmolLM2-135M: 211 casts
// of 0.8 GB in all become one), and Get returns views of it.
type WeightCache struct {
	b      tensor.Backend
	dt     tensor.DType
	copies map[*tensor.Tensor]*tensor.Tensor
	fresh  map[*tensor.Tensor]bool

	flat      *tensor.Tensor              // the registered flat F32 buffer (SetFlat), or nil
	flatHalf  *tensor.Tensor              // its half copy, allocated on first use
	flatFresh bool                        // flatHalf holds flat's current values
	views     map[*tensor.Tensor]flatView // w → its view of flatHalf
}

// flatView is a weight's view of the flat half copy and the master offset it was made for (a re-pack moves
// a weight's tensor in place, so the view is checked against it).
type flatView struct {
	off  int
	view *tensor.Tensor
}

// NewWeightCache returns a cache that casts to dt (F16 or BF16) on backend b.
func NewWeightCache(b tensor.Backend, dt tensor.DType) *WeightCache {
	return &WeightCache{b: b, dt: dt, copies: map[*tensor.Tensor]*tensor.Tensor{}, fresh: map[*tensor.Tensor]bool{},
		views: map[*tensor.Tensor]flatView{}}
}

// SetFlat registers flat, a 1-D F32 buffer that master weights are views of, or nil for none. A weight
// inside it whose offset from flat's start is a multiple of 8 elements (so that its half view is 16-byte
// aligned, as cuBLASLt's fastest kernels want) is then served from one half copy of the whole buffer; other
// weights get copies of their own. Registering another buffer drops the previous one's copy.
func (c *WeightCache) SetFlat(flat *tensor.Tensor) {
	if flat == c.flat || (flat != nil && c.flat != nil && flat.Buf == c.flat.Buf && flat.Offset == c.flat.Offset &&
		flat.Numel() == c.flat.Numel()) {
		c.flat = flat
		return
	}
	c.b.Free(c.flatHalf)
	c.flat, c.flatHalf, c.flatFresh = flat, nil, false
	clear(c.views)
}

// fromFlat returns w's view of the flat half copy, casting the whole buffer if it is stale, or nil when w is
// not an aligned part of the registered buffer.
func (c *WeightCache) fromFlat(w *tensor.Tensor) (*tensor.Tensor, error) {
	f := c.flat
	off := w.Offset - f.Offset
	if w.Buf != f.Buf || off < 0 || off+w.Numel() > f.Numel() || off%8 != 0 {
		return nil, nil
	}
	if c.flatHalf == nil {
		h, err := c.b.Alloc(c.dt, f.Numel())
		if err != nil {
			return nil, fmt.Errorf("amp: weight cache: %w", err)
		}
		c.flatHalf = h
	}
	if !c.flatFresh {
		if err := c.b.Cast(c.flatHalf, f); err != nil {
			return nil, fmt.Errorf("amp: weight cache: %w", err)
		}
		c.flatFresh = true
	}
	if v, ok := c.views[w]; ok && v.off == off && v.view.Shape.Equal(w.Shape) {
		return v.view, nil
	}
	v, err := c.flatHalf.View(off, w.Shape...)
	if err != nil {
		return nil, fmt.Errorf("amp: weight cache: %w", err)
	}
	c.views[w] = flatView{off: off, view: v}
	return v, nil
}

// DType returns the dtype the cache casts to.
func (c *WeightCache) DType() tensor.DType { return c.dt }

// Get returns w (an F32 master weight) cast to the cache's dtype, casting only if w changed since the last
// Invalidate. The returned tensor is owned by the cache; do not free or modify it.
func (c *WeightCache) Get(w *tensor.Tensor) (*tensor.Tensor, error) {
	if w.DType != tensor.F32 {
		return nil, fmt.Errorf("amp: weight cache: master weight %v must be F32", w)
	}
	if c.flat != nil {
		if h, err := c.fromFlat(w); h != nil || err != nil {
			return h, err
		}
	}
	h, ok := c.copies[w]
	if !ok {
		var err error
		if h, err = c.b.Alloc(c.dt, w.Shape...); err != nil {
			return nil, fmt.Errorf("amp: weight cache: %w", err)
		}
		c.copies[w] = h
	}
	if !c.fresh[w] {
		if err := c.b.Cast(h, w); err != nil {
			return nil, fmt.Errorf("amp: weight cache: %w", err)
		}
		c.fresh[w] = true
	}
	return h, nil
}

// Invalidate marks every cached copy stale; call it after the optimizer updated the master weights.
func (c *WeightCache) Invalidate() {
	clear(c.fresh)
	c.flatFresh = false
}

// Free releases every cached copy.
func (c *WeightCache) Free() {
	for w, h := range c.copies {
		c.b.Free(h)
		delete(c.copies, w)
	}
	clear(c.fresh)
	c.b.Free(c.flatHalf)
	c.flatHalf, c.flatFresh = nil, false
	clear(c.views)
}
