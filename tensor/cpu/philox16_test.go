package cpu

import (
	"testing"

	"github.com/tune-ml/tune/tensor"
)

// TestPhilox16 checks the vector Philox against tensor.Philox4x32, across a carry into the counter's high word.
func TestPhilox16(t *testing.T) {
	if philox16 == nil {
		t.Skip("no vector Philox on this processor")
	}
	key := [2]uint32{0x12345678, 0x9abcdef0}
	for _, ctr0 := range []uint64{0, 1, 1<<32 - 7, 0xfedcba9876543210} {
		var out [64]uint32
		philox16(ctr0, key, &out)
		for j := range 16 {
			c := ctr0 + uint64(j)
			want := tensor.Philox4x32([4]uint32{uint32(c), uint32(c >> 32), 0, 0}, key)
			for w := range 4 {
				if out[16*w+j] != want[w] {
					t.Fatalf("counter %#x word %d: %#x, want %#x", c, w, out[16*w+j], want[w])
				}
			}
		}
	}
}
