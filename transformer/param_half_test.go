package transformer

import (
	"slices"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// TestPackStoredHalf: PackStored puts the chosen frozen parameters in the Half buffer, each starting at a
// multiple of 8 elements (16-byte aligned) whatever the sizes before it, with their values rounded once;
// trainable and other frozen parameters stay F32; RepackFrozen back to F32 leaves the trainable views alone.
func TestPackStoredHalf(t *testing.T) {
	b := cpu.New()
	mk := func(n int, trainable bool) *Param {
		v, err := b.Alloc(tensor.F32, n)
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = 1 + float32(i)/3 // not exact in BF16
		}
		if err := b.Upload(v, vals); err != nil {
			t.Fatal(err)
		}
		return &Param{Value: v, Trainable: trainable}
	}
	a, w, c, d := mk(3, false), mk(5, false), mk(4, true), mk(6, false)
	list := []NamedParameter{{"a.weight", a}, {"w.weight", w}, {"c.weight", c}, {"n.weight", d}}
	g := ParamGroups{B: b}
	store := func(p *Param) bool { return p == a || p == w }
	if err := g.PackStored(list, tensor.BF16, store); err != nil {
		t.Fatal(err)
	}
	if a.Value.DType != tensor.BF16 || w.Value.DType != tensor.BF16 || c.Value.DType != tensor.F32 || d.Value.DType != tensor.F32 {
		t.Fatalf("dtypes a %v w %v c %v n %v", a.Value.DType, w.Value.DType, c.Value.DType, d.Value.DType)
	}
	if g.Half.Numel() != 16 || a.Value.Offset-g.Half.Offset != 0 || w.Value.Offset-g.Half.Offset != 8 {
		t.Errorf("Half holds %d elements, a at %d, w at %d; want 16, 0, 8", g.Half.Numel(), a.Value.Offset-g.Half.Offset,
			w.Value.Offset-g.Half.Offset)
	}
	if a.Grad != nil || w.Grad != nil || c.Grad == nil || g.Train.Numel() != 4 || g.Frozen.Numel() != 6 {
		t.Errorf("grads a %v w %v c %v, Train %d, Frozen %d", a.Grad, w.Grad, c.Grad, g.Train.Numel(), g.Frozen.Numel())
	}
	got := make([]float32, 5)
	if err := b.Download(got, w.Value); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 5)
	h := make([]uint16, 5)
	for i := range want {
		want[i] = 1 + float32(i)/3
	}
	tensor.NarrowHalf(h, want, tensor.BF16)
	tensor.WidenHalf(want, h, tensor.BF16)
	if !slices.Equal(got, want) {
		t.Errorf("stored values %v, want the BF16 rounding %v", got, want)
	}
	train := g.Train
	if err := g.RepackFrozen(list, tensor.F32, store); err != nil {
		t.Fatal(err)
	}
	if g.Train != train || g.Half != nil || w.Value.DType != tensor.F32 || g.Frozen.Numel() != 14 {
		t.Errorf("after RepackFrozen(F32): Train moved %v, Half %v, w %v, Frozen %d", g.Train != train, g.Half, w.Value.DType, g.Frozen.Numel())
	}
}
