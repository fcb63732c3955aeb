package sft

import (
	"slices"
	"testing"
)

func exampleOf(n, line int) Example {
	e := Example{Line: line}
	for i := 0; i < n; i++ {
		e.InputIDs = append(e.InputIDs, int32(100*line+i))
		e.Labels = append(e.Labels, int32(100*line+i))
	}
	return e
}

// TestBestFitDecreasing: lengths 6 5 4 3 2 2 into rows of 8 go longest first into the fullest row that fits:
// [6 2] [5 3] [4 2].
func TestBestFitDecreasing(t *testing.T) {
	d := &Dataset{MaxLength: 8}
	for i, n := range []int{3, 6, 2, 5, 4, 2} {
		d.Examples = append(d.Examples, exampleOf(n, i+1))
	}
	rows := d.Rows(true)
	var got [][]int
	for _, r := range rows {
		got = append(got, r.Lines)
		if len(r.InputIDs) > 8 {
			t.Errorf("row of %d tokens", len(r.InputIDs))
		}
	}
	if want := [][]int{{2, 3}, {4, 1}, {5, 6}}; !slices.EqualFunc(got, want, slices.Equal[[]int]) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	r := rows[0] // line 2 (6 tokens) then line 3 (2 tokens)
	if !slices.Equal(r.PositionIDs, []int32{0, 1, 2, 3, 4, 5, 0, 1}) || !slices.Equal(r.SegmentIDs, []int32{1, 1, 1, 1, 1, 1, 2, 2}) {
		t.Errorf("positions %v segments %v", r.PositionIDs, r.SegmentIDs)
	}
	if r.Labels[0] != IgnoreIndex || r.Labels[6] != IgnoreIndex || r.Labels[7] != 301 || r.Labels[1] != 201 {
		t.Errorf("labels %v: each example's first label is -100", r.Labels)
	}
	unpacked := d.Rows(false)
	if len(unpacked) != 6 || unpacked[0].PositionIDs != nil {
		t.Fatalf("unpacked rows %v", unpacked)
	}
}

func TestCollate(t *testing.T) {
	d := &Dataset{MaxLength: 8}
	d.Examples = []Example{exampleOf(3, 1), exampleOf(1, 2)}
	d.Examples[1].InputIDs[0], d.Examples[1].Labels[0] = 7, 7 // the pad id, supervised (an EOS that is also pad)
	b, err := Collate(d.Rows(false), 7)
	if err != nil {
		t.Fatal(err)
	}
	if b.B != 2 || b.T != 3 || b.PositionIDs != nil || b.SegmentIDs != nil {
		t.Fatalf("%+v", b)
	}
	if !slices.Equal(b.InputIDs, []int32{100, 101, 102, 7, 7, 7}) || !slices.Equal(b.AttentionMask, []int32{1, 1, 1, 1, 0, 0}) ||
		!slices.Equal(b.Labels, []int64{100, 101, 102, 7, -100, -100}) {
		t.Fatalf("ids %v mask %v labels %v", b.InputIDs, b.AttentionMask, b.Labels)
	}
	b, _ = Collate(d.Rows(true), 0)
	if b.B != 1 || !slices.Equal(b.SegmentIDs, []int32{1, 1, 1, 2}) || !slices.Equal(b.PositionIDs, []int32{0, 1, 2, 0}) {
		t.Fatalf("packed %+v", b)
	}
}
