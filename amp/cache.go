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
type WeightCache struct {
	b      tensor.Backend
	dt     tensor.DType
	copies map[*tensor.Tensor]*tensor.Tensor
	fresh  map[*tensor.Tensor]bool
}

// NewWeightCache returns a cache that casts to dt (F16 or BF16) on backend b.
func NewWeightCache(b tensor.Backend, dt tensor.DType) *WeightCache {
	return &WeightCache{b: b, dt: dt, copies: map[*tensor.Tensor]*tensor.Tensor{}, fresh: map[*tensor.Tensor]bool{}}
}

// DType returns the dtype the cache casts to.
func (c *WeightCache) DType() tensor.DType { return c.dt }

// Get returns w (an F32 master weight) cast to the cache's dtype, casting only if w changed since the last
// Invalidate. The returned tensor is owned by the cache; do not free or modify it.
func (c *WeightCache) Get(w *tensor.Tensor) (*tensor.Tensor, error) {
	if w.DType != tensor.F32 {
		return nil, fmt.Errorf("amp: weight cache: master weight %v must be F32", w)
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
func (c *WeightCache) Invalidate() { clear(c.fresh) }

// Free releases every cached copy.
func (c *WeightCache) Free() {
	for w, h := range c.copies {
		c.b.Free(h)
		delete(c.copies, w)
	}
	clear(c.fresh)
}
