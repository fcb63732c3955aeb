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
