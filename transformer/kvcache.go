package transformer

import (
	"fmt"

	"github.com/tune-ml/tune/tensor"
)

// IncrementalDecoder is a causal language model that decodes with a key/value cache, as transformers'
// generate does with past_key_values (a DynamicCache): the prompt runs in one forward (prefill) that stores
// every layer's keys and values, then each new token runs alone, its query attending to the cached keys
// (causal attention aligned bottom-right, tensor.AttentionArgs.Causal with Tq < Tk) and its rotary or
// learned position embedding taken at its own position. The logits equal the full forward's at every position
// up to rounding; the cost of a step no longer grows with the sequence except in attention.
//
// The decode pass is an inference pass (no dropout, nothing kept for Backward; a pending Backward is
// cancelled), for one sequence (B = 1), in the model's policy at NewKVCache (FP32, or F16/BF16 autocast: the
// cache then holds the GEMM dtype's keys and values, as PyTorch's autocast k_proj outputs are). Projections
// replaced by LoRA adapters (unmerged) compute their adapter in both passes.
type IncrementalDecoder interface {
	// NewKVCache allocates an empty cache for sequences of up to maxLen tokens (prompt and generated tokens)
	// under the model's current policy: memory L·maxLen·2·Hkv·D elements of the GEMM dtype, sized by the
	// request, never by the config's max_position_embeddings. Free it when done.
	NewKVCache(maxLen int) (*KVCache, error)
	// Decode runs the tokens ids at positions cache.Len … cache.Len+len(ids)−1, appends their keys and values to
	// cache and returns FP32 host logits: (len(ids), V) when all is set, else (V) of the last token only (the
	// LM head then runs on one row). The weights must not change while a cache is being filled: a Decode on
	// a non-empty cache reuses the half-precision weight copies of the previous pass (ForwardOptions.ReuseWeightCasts).
	Decode(cache *KVCache, ids []int32, all bool) ([]float32, error)
}

// ContextLimiter is implemented by a causal LM whose sequences (prompt and generated tokens) have a length limit:
// max_position_embeddings (and a sliding window tune does not compute beyond), GPT-2's n_positions. Generation
// checks a request against it before any forward, with or without a key/value cache.
type ContextLimiter interface {
	// ContextLimit returns the most positions a sequence may hold; 0 when there is no limit.
	ContextLimit() int
}

// KVCache is the key/value cache of an IncrementalDecoder: per layer, the keys and values of the positions
// decoded so far, as dense (MaxLen, Width) rows in the cache's dtype (row t holds position t's heads side by
// side, (Hkv, D) = Width). Rows [0, Len) are filled. Make one with the model's NewKVCache.
type KVCache struct {
	K, V   []*tensor.Tensor // per layer (MaxLen, Width) DType
	MaxLen int              // positions the cache holds
	Len    int              // positions filled
	Width  int              // Hkv·D
	DType  tensor.DType     // the GEMM dtype of the policy the cache was made under
	Owner  any              // the model that made the cache; Decode refuses another model's

	b tensor.Backend
}

// NewKVCache allocates a zeroed cache of layers × 2 buffers of (maxLen, width) dt on b for owner (a family's
// NewKVCache calls it with the model itself).
func NewKVCache(b tensor.Backend, owner any, layers, maxLen, width int, dt tensor.DType) (*KVCache, error) {
	if maxLen < 1 {
		return nil, fmt.Errorf("transformer: a key/value cache of %d positions: want at least 1", maxLen)
	}
	c := &KVCache{MaxLen: maxLen, Width: width, DType: dt, Owner: owner, b: b}
	for i := range layers {
		k, err := b.Alloc(dt, maxLen, width)
		if err != nil {
			c.Free()
			return nil, fmt.Errorf("transformer: key/value cache layer %d (%d, %d) %v: %w", i, maxLen, width, dt, err)
		}
		v, err := b.Alloc(dt, maxLen, width)
		if err != nil {
			b.Free(k)
			c.Free()
			return nil, fmt.Errorf("transformer: key/value cache layer %d (%d, %d) %v: %w", i, maxLen, width, dt, err)
		}
		c.K, c.V = append(c.K, k), append(c.V, v)
	}
	return c, nil
}

// Bytes returns the cache's device memory in bytes.
func (c *KVCache) Bytes() int64 {
	return int64(2*len(c.K)) * int64(c.MaxLen) * int64(c.Width) * int64(c.DType.Size())
}

// Reset empties the cache for a new sequence (the buffers are kept).
func (c *KVCache) Reset() { c.Len = 0 }

// Free releases the buffers; the cache cannot be used afterwards.
func (c *KVCache) Free() {
	for i := range c.K {
		c.b.Free(c.K[i])
		c.b.Free(c.V[i])
	}
	c.K, c.V, c.Len, c.MaxLen = nil, nil, 0, 0
}

// Check validates a Decode call on c by owner under GEMM dtype dt for n new tokens with layers layers.
func (c *KVCache) Check(owner any, layers int, dt tensor.DType, n int) error {
	switch {
	case c == nil || c.K == nil:
		return fmt.Errorf("transformer: Decode needs a cache from the model's NewKVCache (this one is nil or freed)")
	case c.Owner != owner || len(c.K) != layers:
		return fmt.Errorf("transformer: the key/value cache was made by another model")
	case c.DType != dt:
		return fmt.Errorf("transformer: the key/value cache holds %v but the model's policy computes in %v: make a new cache after SetPolicy", c.DType, dt)
	case n < 1:
		return fmt.Errorf("transformer: Decode got no tokens")
	case c.Len+n > c.MaxLen:
		return fmt.Errorf("transformer: %d cached + %d new tokens exceed the key/value cache's %d positions: make a larger cache", c.Len, n, c.MaxLen)
	}
	return nil
}

// Rows returns rows [from, from+n) of layer i's keys and values, (n, Width) views; an error when they lie
// outside the cache.
func (c *KVCache) Rows(i, from, n int) (k, v *tensor.Tensor, err error) {
	if i < 0 || i >= len(c.K) || from < 0 || n < 1 || from+n > c.MaxLen {
		return nil, nil, fmt.Errorf("transformer: key/value cache rows [%d, %d) of layer %d: the cache has %d layers of %d positions", from, from+n, i, len(c.K), c.MaxLen)
	}
	if k, err = c.K[i].View(from*c.Width, n, c.Width); err != nil {
		return nil, nil, err
	}
	v, err = c.V[i].View(from*c.Width, n, c.Width)
	return k, v, err
}
