package cpu

import (
	"math"
	"slices"
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// TestArgMax: the first maximum of each row, a NaN beating every number (the first NaN), −Inf rows give 0,
// as torch.argmax; BF16 rounding that makes two entries equal picks the first.
func TestArgMax(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	rows := [][]float32{{1, 3, 3, 2}, {0, nan, 5, nan}, {-inf, -inf, -inf, -inf}, {-1, inf, 2, inf}, {1.001, 1.002, 0, 0}}
	want := map[tensor.DType][]int32{tensor.F32: {1, 1, 0, 1, 1}, tensor.BF16: {1, 1, 0, 1, 0}}
	b := New()
	for dt, w := range want {
		x, _ := b.Alloc(dt, len(rows), 4)
		out, _ := b.Alloc(tensor.I32, len(rows))
		if err := b.Upload(x, slices.Concat(rows...)); err != nil {
			t.Fatal(err)
		}
		if err := b.ArgMax(out, x); err != nil {
			t.Fatal(err)
		}
		got := make([]int32, len(rows))
		if err := b.Download(got, out); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, w) {
			t.Errorf("%v: ArgMax %v, want %v", dt, got, w)
		}
	}
	x, _ := b.Alloc(tensor.F32, 2, 3)
	if err := b.ArgMax(x, x); err == nil {
		t.Error("an F32 output accepted")
	}
}
