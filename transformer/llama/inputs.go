package llama

import (
	"fmt"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// checkBatch validates a batch against the model before anything is uploaded.
func (m *ForCausalLM) checkBatch(batch *loaders.Batch) error {
	err := transformer.CheckBatchShape("llama", batch, func(b *loaders.Batch) []transformer.BatchArray {
		return []transformer.BatchArray{
			{Name: "InputIDs", Len: len(b.InputIDs)},
			{Name: "AttentionMask", Len: len(b.AttentionMask), Optional: true},
			{Name: "PositionIDs", Len: len(b.PositionIDs), Optional: true},
			{Name: "SegmentIDs", Len: len(b.SegmentIDs), Optional: true},
			{Name: "Labels", Len: len(b.Labels), Optional: true,
				Hint: " (a causal LM takes one label per token, the input ids with -100 where no loss is wanted)"},
			{Name: "Targets", Len: len(b.Targets), Refused: "a causal LM takes token labels, not regression Targets"},
		}
	})
	if err != nil {
		return err
	}
	if w, t := m.Config.SlidingWindow, batch.T; w > 0 && t > w {
		return fmt.Errorf("llama: the sequence length %d exceeds the config's sliding_window %d; tune computes full "+
			"causal attention only, which equals the sliding window for sequences of at most %d tokens: truncate to "+
			"max_length %d (or set sliding_window to null in config.json if the model was trained without one)", t, w, w, w)
	}
	return nil
}

// Supervised returns the number of next-token targets of batch: labels[b, t] ≠ −100 for t ≥ 1 (the first label
// of each row is the target of no prediction).
func (m *ForCausalLM) Supervised(batch *loaders.Batch) int {
	if batch == nil {
		return 0
	}
	return transformer.SupervisedTargets(batch.Labels, batch.T)
}

// grow returns s resized to n, reallocating only when its capacity is short.
func grow[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

// mustView is t.View for offsets the layout guarantees; a failure panics (recoverError reports it).
func mustView(t *tensor.Tensor, off int, shape ...int) *tensor.Tensor {
	v, err := t.View(off, shape...)
	if err != nil {
		panic(err)
	}
	return v
}

// upload copies the batch into the pass buffers and returns what the layers read: ids; positions (the batch's,
// else 0…T−1 restarting at each segment); the rotary tables grown to the largest position; the additive key
// mask (nil when nothing is padded); and segment ids.
func (m *ForCausalLM) upload(batch *loaders.Batch) (passInputs, error) {
	b, t := batch.B, batch.T
	n, h, a := b*t, &m.host, &m.act
	in := passInputs{b: b, t: t, pos: a.pos}
	h.pos = grow(h.pos, n)
	maxPos := int32(0)
	for i := range h.pos {
		switch {
		case batch.PositionIDs != nil:
			h.pos[i] = batch.PositionIDs[i]
		case batch.SegmentIDs != nil && i%t != 0 && batch.SegmentIDs[i] == batch.SegmentIDs[i-1]:
			h.pos[i] = h.pos[i-1] + 1
		case batch.SegmentIDs != nil:
			h.pos[i] = 0
		default:
			h.pos[i] = int32(i % t)
		}
		if h.pos[i] < 0 {
			return in, fmt.Errorf("llama: batch PositionIDs[%d] = %d is negative", i, h.pos[i])
		}
		maxPos = max(maxPos, h.pos[i])
	}
	if err := m.ensureRope(int(maxPos) + 1); err != nil {
		return in, err
	}
	in.cos, in.sin = m.rope.cos, m.rope.sin
	up := []struct {
		dst *tensor.Tensor
		src any
		why string
	}{{a.ids, batch.InputIDs, "input ids"}, {a.pos, h.pos, "position ids"}}
	padded := false
	for _, v := range batch.AttentionMask {
		if v == 0 {
			padded = true
			break
		}
	}
	if padded {
		h.mask = grow(h.mask, n)
		for i, v := range batch.AttentionMask {
			h.mask[i] = 0
			if v == 0 {
				h.mask[i] = transformer.MaskedScore
			}
		}
		in.mask = a.mask
		up = append(up, struct {
			dst *tensor.Tensor
			src any
			why string
		}{a.mask, h.mask, "attention mask"})
	}
	if batch.SegmentIDs != nil {
		in.segments = a.segments
		up = append(up, struct {
			dst *tensor.Tensor
			src any
			why string
		}{a.segments, batch.SegmentIDs, "segment ids"})
	}
	for _, u := range up {
		if err := m.Backend().Upload(u.dst, u.src); err != nil {
			return in, fmt.Errorf("llama: uploading %s: %w", u.why, err)
		}
	}
	return in, nil
}

// ensureRope grows the device cos/sin tables to hold positions 0…p−1 (to the next power of two, so a run
// regrows them a handful of times at most).
func (m *ForCausalLM) ensureRope(p int) error {
	r := &m.rope
	if p <= r.p {
		return nil
	}
	size := 1
	for size < p {
		size *= 2
	}
	cos, sin := ropeTables(r.inv, size)
	half := len(r.inv)
	ct, err := m.Backend().Alloc(tensor.F32, size, half)
	if err != nil {
		return fmt.Errorf("llama: rotary tables (%d, %d): %w", size, half, err)
	}
	st, err := m.Backend().Alloc(tensor.F32, size, half)
	if err != nil {
		m.Backend().Free(ct)
		return fmt.Errorf("llama: rotary tables (%d, %d): %w", size, half, err)
	}
	if err := m.Backend().Upload(ct, cos); err != nil {
		return err
	}
	if err := m.Backend().Upload(st, sin); err != nil {
		return err
	}
	m.Backend().Free(r.cos)
	m.Backend().Free(r.sin)
	r.cos, r.sin, r.p = ct, st, size
	return nil
}
