package transformer

import (
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
)

// TestCheckBatchShape: each kind of bad batch gets an error naming the family, the array and the lengths.
func TestCheckBatchShape(t *testing.T) {
	arrays := func(b *loaders.Batch) []BatchArray {
		return []BatchArray{
			{Name: "InputIDs", Len: len(b.InputIDs)},
			{Name: "AttentionMask", Len: len(b.AttentionMask), Optional: true},
			{Name: "Labels", Len: len(b.Labels), PerRow: true, Optional: true, Hint: " (one per row)"},
			{Name: "Targets", Len: len(b.Targets), Refused: "no regression here"},
		}
	}
	ids := make([]int32, 6)
	for _, c := range []struct {
		name  string
		batch *loaders.Batch
		want  string // "" for no error
	}{
		{"good", &loaders.Batch{B: 2, T: 3, InputIDs: ids}, ""},
		{"good with optional arrays", &loaders.Batch{B: 2, T: 3, InputIDs: ids, AttentionMask: make([]int32, 6), Labels: []int64{0, 1}}, ""},
		{"nil", nil, "fam: Forward got a nil batch"},
		{"empty", &loaders.Batch{B: 0, T: 3}, "fam: batch shape (0, 3), want B > 0 and T > 0"},
		{"short ids", &loaders.Batch{B: 2, T: 3, InputIDs: ids[:5]}, "fam: batch InputIDs has 5 entries, want B·T = 2·3 = 6"},
		{"missing ids", &loaders.Batch{B: 2, T: 3}, "fam: batch InputIDs has 0 entries, want B·T = 2·3 = 6"},
		{"short mask", &loaders.Batch{B: 2, T: 3, InputIDs: ids, AttentionMask: make([]int32, 2)}, "fam: batch AttentionMask has 2 entries"},
		{"token labels", &loaders.Batch{B: 2, T: 3, InputIDs: ids, Labels: make([]int64, 6)}, "fam: batch Labels has 6 entries, want B = 2 (one per row)"},
		{"refused", &loaders.Batch{B: 2, T: 3, InputIDs: ids, Targets: []float32{1, 2}}, "fam: batch Targets is set (2 entries): no regression here"},
	} {
		err := CheckBatchShape("fam", c.batch, arrays)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
