package bert

import (
	"fmt"
	"github.com/tune-ml/tune/transformer"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// checkBatch validates a batch against the model before anything is uploaded.
func (m *BertForSequenceClassification) checkBatch(batch *loaders.Batch) error {
	err := transformer.CheckBatchShape("bert", batch, func(b *loaders.Batch) []transformer.BatchArray {
		return []transformer.BatchArray{
			{Name: "InputIDs", Len: len(b.InputIDs)},
			{Name: "TokenTypeIDs", Len: len(b.TokenTypeIDs), Optional: true},
			{Name: "AttentionMask", Len: len(b.AttentionMask), Optional: true},
			{Name: "PositionIDs", Len: len(b.PositionIDs), Optional: true},
			{Name: "Labels", Len: len(b.Labels), PerRow: true, Optional: true,
				Hint: " (a sequence classifier takes one class id per row, not (B, T) token labels)"},
			{Name: "Targets", Len: len(b.Targets), PerRow: true, Optional: true},
			{Name: "SegmentIDs", Len: len(b.SegmentIDs), Refused: "BERT does not take packed sequences; pad each example to its own row"},
		}
	})
	if err != nil {
		return err
	}
	if t := batch.T; t > m.Config.MaxPositionEmbeddings {
		return fmt.Errorf("bert: sequence length %d exceeds max_position_embeddings %d; truncate to at most %d tokens",
			t, m.Config.MaxPositionEmbeddings, m.Config.MaxPositionEmbeddings)
	}
	return nil
}

// grow returns s resized to n, reallocating only when its capacity is short.
func grow[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

// upload copies the batch into the pass buffers: ids, token types (zeros when absent), positions 0…T−1, the
// pooler's first-token rows b·T, the additive mask (0 attended, MaskedScore padding; all attended when the
// batch has no mask), and labels or targets.
func (m *BertForSequenceClassification) upload(batch *loaders.Batch) error {
	b, t := batch.B, batch.T
	n, h, a := b*t, &m.host, &m.act
	h.pos, h.rows, h.mask = grow(h.pos, n), grow(h.rows, b), grow(h.mask, n)
	for i := range h.pos {
		h.pos[i] = int32(i % t)
		if batch.PositionIDs != nil {
			h.pos[i] = batch.PositionIDs[i]
		}
	}
	for i := range h.rows {
		h.rows[i] = int32(i * t)
	}
	for i := range h.mask {
		h.mask[i] = 0
		if batch.AttentionMask != nil && batch.AttentionMask[i] == 0 {
			h.mask[i] = transformer.MaskedScore
		}
	}
	types := batch.TokenTypeIDs
	if types == nil {
		h.types = grow(h.types, n)
		clear(h.types)
		types = h.types
	}
	for _, u := range []struct {
		dst *tensor.Tensor
		src any
		why string
	}{
		{a.ids, batch.InputIDs, "input ids"}, {a.types, types, "token type ids"}, {a.pos, h.pos, "position ids"},
		{m.Pooler.c.rows, h.rows, "pooler rows"}, {a.mask, h.mask, "attention mask"},
	} {
		if err := m.Backend().Upload(u.dst, u.src); err != nil {
			return fmt.Errorf("transformer: uploading %s: %w", u.why, err)
		}
	}
	if batch.Labels != nil {
		if err := m.Backend().Upload(a.labels, batch.Labels); err != nil {
			return fmt.Errorf("transformer: uploading labels: %w", err)
		}
	}
	if batch.Targets != nil {
		if err := m.Backend().Upload(a.targets, batch.Targets); err != nil {
			return fmt.Errorf("transformer: uploading regression targets: %w", err)
		}
	}
	return nil
}
