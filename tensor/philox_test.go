package tensor

import "testing"

// Known-answer vectors for philox4x32-10 from the Random123 distribution (kat_vectors).
func TestPhiloxKnownAnswers(t *testing.T) {
	cases := []struct {
		name string
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{"zeros", [4]uint32{}, [2]uint32{}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{"ones", [4]uint32{^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0)}, [2]uint32{^uint32(0), ^uint32(0)}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{"pi", [4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, c := range cases {
		if got := Philox4x32(c.ctr, c.key); got != c.want {
			t.Errorf("%s: Philox4x32 = %08x, want %08x", c.name, got, c.want)
		}
	}
}

func TestPhiloxKeepRate(t *testing.T) {
	const n = 200000
	for _, p := range []float32{0.1, 0.5} {
		kept := 0
		for i := 0; i < n; i++ {
			if PhiloxKeep(1234, 7, i, p) {
				kept++
			}
		}
		rate := float64(kept) / n
		if d := rate - float64(1-p); d > 0.01 || d < -0.01 {
			t.Errorf("p=%v: kept fraction %.4f, want %.2f±0.01", p, rate, 1-p)
		}
	}
}

// TestPhiloxDrawLayout pins the dropout draw's layout: element i is 16-bit slice i%8 of the block at counter
// offset + i/8 (slice 2k the low half of word k), PhiloxKeep is the integer test against PhiloxThreshold, and a
// probability is quantised up to a multiple of 2⁻¹⁶.
func TestPhiloxDrawLayout(t *testing.T) {
	var seed, offset uint64 = 0x1234_5678_9abc, 1<<32 - 3 // the counter carries into its high word
	for i := 0; i < 64; i++ {
		ctr := offset + uint64(i/8)
		blk := Philox4x32([4]uint32{uint32(ctr), uint32(ctr >> 32), 0, 0}, [2]uint32{uint32(seed), uint32(seed >> 32)})
		want := blk[(i%8)/2] & 0xffff
		if i%2 == 1 {
			want = blk[(i%8)/2] >> 16
		}
		if got := PhiloxDraw(seed, offset, i); got != want {
			t.Fatalf("element %d: draw %#x, want %#x", i, got, want)
		}
		if got := PhiloxUniform(seed, offset, i); got != float32(want)/65536 {
			t.Fatalf("element %d: uniform %v, want %v", i, got, float32(want)/65536)
		}
		for _, p := range []float32{0, 1.0 / 65536, 0.1, 0.5, 0.999} {
			if PhiloxKeep(seed, offset, i, p) != (want >= PhiloxThreshold(p)) {
				t.Fatalf("element %d, p = %v: PhiloxKeep disagrees with the threshold %d", i, p, PhiloxThreshold(p))
			}
		}
	}
	for _, c := range []struct {
		p    float32
		want uint32
	}{{0, 0}, {0.1, 6554}, {0.5, 32768}, {1.0 / 65536, 1}, {1.5 / 65536, 2}} {
		if got := PhiloxThreshold(c.p); got != c.want {
			t.Errorf("PhiloxThreshold(%v) = %d, want %d", c.p, got, c.want)
		}
	}
	if got := PhiloxCounters(17); got != 3 {
		t.Errorf("PhiloxCounters(17) = %d, want 3", got)
	}
}
