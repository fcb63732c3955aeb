package amp

import (
	"fmt"

	"github.com/tune-ml/tune/tensor"
)

// WeightCache casts FP32 master weights to the autocast dtype once per optimizer step and hands out the same
// half-precision copy to every use in forward and backward (PyTorch's autocast weight-cast cache, FACTS §1.3,
// kept for the whole step instead of one forward). The copies are allocated on first use and reused for the
// rest of training, so a steady-state step allocates nothing.
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
