package trainer

import (
	"slices"
	"testing"
)

// TestRelayoutMovesMomentsByName: moments saved for one order of the same parameters (a checkpoint written
// before BERT's query/key/value weights were packed together) land at each parameter's new offset; other
// parameter lists are not the same, and a range outside the saved moments is an error.
func TestRelayoutMovesMomentsByName(t *testing.T) {
	old := []paramLayout{{"q.weight", 0, 2}, {"q.bias", 2, 1}, {"k.weight", 3, 2}, {"k.bias", 5, 1}}
	now := []paramLayout{{"q.weight", 0, 2}, {"q.bias", 4, 1}, {"k.weight", 2, 2}, {"k.bias", 5, 1}}
	if !sameParams(old, now) {
		t.Fatal("same parameters at other offsets are not the same")
	}
	got, err := relayout([]float32{1, 2, 3, 4, 5, 6}, old, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{1, 2, 4, 5, 3, 6}; !slices.Equal(got, want) {
		t.Fatalf("relayout = %v, want %v", got, want)
	}
	other := []paramLayout{{"q.weight", 0, 2}, {"q.bias", 4, 1}, {"v.weight", 2, 2}, {"k.bias", 5, 1}}
	if sameParams(old, other) || sameParams(old, now[:3]) {
		t.Fatal("other parameter lists are the same")
	}
	if _, err := relayout([]float32{1, 2, 3}, old, now); err == nil {
		t.Fatal("moments shorter than the layout: no error")
	}
}
