package transformer

import (
	"fmt"

	"github.com/tune-ml/tune/loaders"
)

// BatchArray is one array of a loaders.Batch as a model takes it, for CheckBatchShape.
type BatchArray struct {
	Name     string // the loaders.Batch field, e.g. "InputIDs"
	Len      int    // its length
	PerRow   bool   // one entry per row (B), not per token (B·T)
	Optional bool   // absent (length 0) is allowed
	Hint     string // added to the length error, e.g. " (a causal LM takes one label per token)"
	Refused  string // non-empty: the model does not take the array, and this says why (it must be absent)
}

// CheckBatchShape is the first check of every family's Forward: a batch, B > 0 and T > 0, and each of the
// arrays the model reads (arrays returns them for the non-nil batch) with the length it takes. Errors start
// with family ("llama: ...") and name the array, its length and the length wanted.
func CheckBatchShape(family string, batch *loaders.Batch, arrays func(*loaders.Batch) []BatchArray) error {
	if batch == nil {
		return fmt.Errorf("%s: Forward got a nil batch", family)
	}
	b, t := batch.B, batch.T
	if b <= 0 || t <= 0 {
		return fmt.Errorf("%s: batch shape (%d, %d), want B > 0 and T > 0", family, b, t)
	}
	for _, a := range arrays(batch) {
		if a.Refused != "" {
			if a.Len != 0 {
				return fmt.Errorf("%s: batch %s is set (%d entries): %s", family, a.Name, a.Len, a.Refused)
			}
			continue
		}
		want, what := b*t, fmt.Sprintf("B·T = %d·%d = %d", b, t, b*t)
		if a.PerRow {
			want, what = b, fmt.Sprintf("B = %d", b)
		}
		if a.Len != want && !(a.Optional && a.Len == 0) {
			return fmt.Errorf("%s: batch %s has %d entries, want %s%s", family, a.Name, a.Len, what, a.Hint)
		}
	}
	return nil
}
