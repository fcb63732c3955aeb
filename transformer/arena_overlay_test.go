package transformer

import (
	"slices"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

// TestArenaOverlay: the layouts of an Overlay start at the same offset (their views overlap), the arena is
// sized for the largest of them, a Take after the Overlay starts past it, and Measure marks the buffers of the
// second and later layouts Shared.
func TestArenaOverlay(t *testing.T) {
	a := NewArena(cpu.New())
	var before, after *tensor.Tensor
	var first [3]*tensor.Tensor
	sizes := []int{256, 512, 128} // elements per layout (multiples of the alignment)
	layout := func(a *Arena) error {
		before = a.Take(tensor.F32, 128)
		a.Overlay(len(sizes), func(i int) { first[i] = a.Take(tensor.F32, sizes[i]) })
		after = a.Take(tensor.F32, 128)
		return nil
	}
	bufs, n, err := a.Measure(layout)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(4 * (128 + 512 + 128)); n != want {
		t.Errorf("Measure: %d bytes, want %d (the largest layout, not the sum)", n, want)
	}
	var shared []bool
	for _, b := range bufs {
		shared = append(shared, b.Shared)
	}
	if want := []bool{false, false, true, true, false}; !slices.Equal(shared, want) {
		t.Errorf("Shared flags %v, want %v", shared, want)
	}
	if err := a.Carve(layout); err != nil {
		t.Fatal(err)
	}
	if first[0].Offset != first[1].Offset || first[1].Offset != first[2].Offset || first[0].Offset != before.Offset+128 {
		t.Errorf("overlay offsets %d, %d, %d (before at %d)", first[0].Offset, first[1].Offset, first[2].Offset, before.Offset)
	}
	if after.Offset != first[0].Offset+512 {
		t.Errorf("the Take after the overlay is at %d, want %d", after.Offset, first[0].Offset+512)
	}
	if a.Bytes() != 4*(128+512+128) {
		t.Errorf("arena holds %d bytes", a.Bytes())
	}
}

// TestArenaScratch: Scratch regions of one name and dtype are one buffer sized for the largest request, laid
// out after every Take (outside Overlays, whose layouts it must not overlap), names and dtypes apart; Measure
// counts each region once.
func TestArenaScratch(t *testing.T) {
	a := NewArena(cpu.New())
	var before, s1, s2, other, half *tensor.Tensor
	var inner [2]*tensor.Tensor
	layout := func(a *Arena) error {
		before = a.Take(tensor.F32, 128)
		s1 = a.Scratch("x", tensor.F32, 2, 64)
		a.Overlay(2, func(i int) {
			inner[i] = a.Take(tensor.F32, 256)
			if i == 1 {
				s2 = a.Scratch("x", tensor.F32, 3, 128) // the largest request: 384 elements
			}
		})
		other = a.Scratch("y", tensor.F32, 128)
		half = a.Scratch("x", tensor.BF16, 128)
		return nil
	}
	bufs, n, err := a.Measure(layout)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(4*(128+256+384+128) + 2*128); n != want {
		t.Errorf("Measure: %d bytes, want %d (each region once, at its largest request)", n, want)
	}
	var own int64
	for _, b := range bufs {
		if !b.Shared {
			own += b.Bytes()
		}
	}
	if own != n {
		t.Errorf("Measure's unshared buffers hold %d bytes, the arena %d", own, n)
	}
	if err := a.Carve(layout); err != nil {
		t.Fatal(err)
	}
	if s1.Offset != s2.Offset || s1.Buf != s2.Buf || s1.Offset < inner[0].Offset+256 || other.Offset != s1.Offset+384 {
		t.Errorf("offsets: before %d, overlay %d/%d, scratch x %d/%d, y %d", before.Offset, inner[0].Offset, inner[1].Offset, s1.Offset, s2.Offset, other.Offset)
	}
	if half.Buf == s1.Buf || half.DType != tensor.BF16 {
		t.Errorf("the BF16 region shares the F32 one's buffer")
	}
}
