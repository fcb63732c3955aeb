package transformer

import (
	"math"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// TestInitNormal: the draws are N(0, std²) from the (seed, index) stream (the same stream gives the same
// values, another index others), the padding row is zero, and std scales them.
func TestInitNormal(t *testing.T) {
	b := cpu.New()
	get := func(std float64, index uint64, pad int) []float32 {
		v, err := b.Alloc(tensor.F32, 64, 32)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free(v)
		if err := InitNormal(b, v, std, 3, index, pad); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, v.Numel())
		if err := b.Download(out, v); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, a2, c, s := get(0.02, 5, 7), get(0.02, 5, -1), get(0.02, 6, -1), get(0.04, 5, -1)
	var ss float64
	for i := range a2 {
		if r := i / 32; r == 7 {
			if a[i] != 0 {
				t.Fatalf("padding row 7: element %d = %v, want 0", i, a[i])
			}
		} else if a[i] != a2[i] {
			t.Fatalf("element %d = %v, then %v from the same stream", i, a[i], a2[i])
		}
		if s[i] != 2*a2[i] {
			t.Fatalf("element %d: std 0.04 gives %v, want 2 × %v", i, s[i], a2[i])
		}
		ss += float64(a2[i]) * float64(a2[i])
	}
	if got := math.Sqrt(ss / float64(len(a2))); got < 0.018 || got > 0.022 {
		t.Errorf("rms %v, want about 0.02", got)
	}
	same := 0
	for i := range c {
		if c[i] == a2[i] {
			same++
		}
	}
	if same > 2 {
		t.Errorf("index 6 repeats %d of index 5's values", same)
	}
}
