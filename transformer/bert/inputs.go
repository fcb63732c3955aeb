package bert

import (
	"fmt"
	"github.com/tune-ml/tune/transformer"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// checkBatch validates a batch against the model before anything is uploaded.
func (m *BertForSequenceClassification) checkBatch(batch *loaders.Batch) error {
	if batch == nil {
		return fmt.Errorf("transformer: Forward got a nil batch")
	}
	b, t := batch.B, batch.T
	if b <= 0 || t <= 0 {
		return fmt.Errorf("transformer: batch shape (%d, %d), want B > 0 and T > 0", b, t)
	}
	if t > m.Config.MaxPositionEmbeddings {
		return fmt.Errorf("transformer: sequence length %d exceeds max_position_embeddings %d; truncate to at most %d tokens",
			t, m.Config.MaxPositionEmbeddings, m.Config.MaxPositionEmbeddings)
	}
	n := b * t
	for _, f := range []struct {
		name string
		got  int
		opt  bool
	}{
		{"InputIDs", len(batch.InputIDs), false},
		{"TokenTypeIDs", len(batch.TokenTypeIDs), true},
		{"AttentionMask", len(batch.AttentionMask), true},
	} {
		if f.got != n && !(f.opt && f.got == 0) {
			return fmt.Errorf("transformer: batch %s has %d entries, want B·T = %d·%d = %d", f.name, f.got, b, t, n)
		}
	}
	if batch.Labels != nil && len(batch.Labels) != b {
		return fmt.Errorf("transformer: batch Labels has %d entries, want one class id per row, B = %d "+
			"(a sequence classifier takes (B) labels, not (B, T) token labels)", len(batch.Labels), b)
	}
	if batch.PositionIDs != nil && len(batch.PositionIDs) != n {
		return fmt.Errorf("transformer: batch PositionIDs has %d entries, want B·T = %d", len(batch.PositionIDs), n)
	}
	if batch.SegmentIDs != nil {
		return fmt.Errorf("transformer: BERT does not take packed sequences (batch SegmentIDs); pad each example to its own row")
	}
	if batch.Targets != nil && len(batch.Targets) != b {
		return fmt.Errorf("transformer: batch Targets has %d entries, want B = %d", len(batch.Targets), b)
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
