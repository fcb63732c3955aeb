package sft

import (
	"fmt"
	"sort"

	"github.com/tune-ml/tune/loaders"
)

// Row is one row of a batch: a single example, or several packed ones.
type Row struct {
	// InputIDs are the token ids of the row.
	InputIDs []int32
	// Labels are the examples' labels, the first of each packed example −100.
	Labels []int32
	// PositionIDs restart at 0 for each packed example; nil for an unpacked row (0…len−1).
	PositionIDs []int32
	// SegmentIDs number the packed examples 1, 2, ...; nil for an unpacked row.
	SegmentIDs []int32
	// Lines are the file lines of the examples in the row.
	Lines []int
}

// Rows returns one row per example, or with packing the examples packed best-fit decreasing into rows of at
// most MaxLength tokens (TRL's pack_dataset strategy "bfd", trl/data_utils.py _pack_bfd): longest first, each
// into the row with the least room that still fits it (among rows with equal room the one that has had it
// longest, as TRL's per-room FIFO queues pick), a new row when none does. Equal lengths keep file order (TRL
// sorts with numpy's argsort, which promises no order for them). Rows come in the order they were opened.
func (d *Dataset) Rows(packing bool) []Row {
	if !packing {
		rows := make([]Row, len(d.Examples))
		for i, e := range d.Examples {
			rows[i] = Row{InputIDs: e.InputIDs, Labels: e.Labels, Lines: []int{e.Line}}
		}
		return rows
	}
	order := make([]int, len(d.Examples))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return len(d.Examples[order[a]].InputIDs) > len(d.Examples[order[b]].InputIDs)
	})
	var bins [][]int
	var used []int
	var since []int // when each row's room last changed: among rows with the same room the oldest wins
	for step, i := range order {
		n := len(d.Examples[i].InputIDs)
		best := -1
		for b := range bins {
			room, bestRoom := d.MaxLength-used[b], 0
			if best >= 0 {
				bestRoom = d.MaxLength - used[best]
			}
			if room >= n && (best < 0 || room < bestRoom || room == bestRoom && since[b] < since[best]) {
				best = b
			}
		}
		if best < 0 {
			bins = append(bins, nil)
			used = append(used, 0)
			since = append(since, 0)
			best = len(bins) - 1
		}
		bins[best] = append(bins[best], i)
		used[best] += n
		since[best] = step
	}
	rows := make([]Row, len(bins))
	for b, members := range bins {
		var r Row
		for s, i := range members {
			e := d.Examples[i]
			r.InputIDs = append(r.InputIDs, e.InputIDs...)
			for k, l := range e.Labels {
				if k == 0 {
					l = IgnoreIndex // the previous example's last token does not predict this one's first
				}
				r.Labels = append(r.Labels, l)
				r.PositionIDs = append(r.PositionIDs, int32(k))
				r.SegmentIDs = append(r.SegmentIDs, int32(s+1))
			}
			r.Lines = append(r.Lines, e.Line)
		}
		rows[b] = r
	}
	return rows
}

// Collate pads rows on the right to the longest one and returns the batch the model contract takes: (B, T)
// input ids (padID at pads), attention mask, labels (−100 at pads) and, when any row is packed, position and
// segment ids (position 0 and segment 0 at pads). Padding is never told from text by its id, so an EOS that
// is also the pad token keeps its label.
func Collate(rows []Row, padID int32) (*loaders.Batch, error) {
	if len(rows) == 0 {
		return nil, fmt.Errorf("sft: no rows to collate")
	}
	T, packed := 0, false
	for _, r := range rows {
		T = max(T, len(r.InputIDs))
		packed = packed || r.SegmentIDs != nil
	}
	b := &loaders.Batch{B: len(rows), T: T, InputIDs: make([]int32, len(rows)*T), AttentionMask: make([]int32, len(rows)*T),
		TokenTypeIDs: make([]int32, len(rows)*T), Labels: make([]int64, len(rows)*T)}
	if packed {
		b.PositionIDs = make([]int32, len(rows)*T)
		b.SegmentIDs = make([]int32, len(rows)*T)
	}
	for i, r := range rows {
		for t := 0; t < T; t++ {
			k := i*T + t
			if t >= len(r.InputIDs) {
				b.InputIDs[k], b.Labels[k] = padID, IgnoreIndex
				continue
			}
			b.InputIDs[k], b.Labels[k], b.AttentionMask[k] = r.InputIDs[t], int64(r.Labels[t]), 1
			if packed {
				if r.SegmentIDs != nil {
					b.PositionIDs[k], b.SegmentIDs[k] = r.PositionIDs[t], r.SegmentIDs[t]
				} else {
					b.PositionIDs[k], b.SegmentIDs[k] = int32(t), 1
				}
			}
		}
	}
	return b, nil
}

// PadID is the id collation pads with: pad_token, else eos_token (as TRL sets pad = eos when a tokenizer has
// none), else 0. Pads are masked, so the choice changes no loss.
func (tk Tokenizer) PadID() int32 {
	if tk.Config != nil {
		for _, s := range []string{tk.Config.PadToken, tk.Config.EOSToken} {
			if id, ok := tk.Tok.TokenID(s); ok && s != "" {
				return id
			}
		}
	}
	return 0
}
