package tensor

import "math"

// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11; the Random123 constants),
// the counter-based generator every backend uses for dropout so that the CPU and a GPU draw identical masks from
// the same (seed, offset).
const (
	philoxM0 = 0xD2511F53
	philoxM1 = 0xCD9E8D57
	philoxW0 = 0x9E3779B9
	philoxW1 = 0xBB67AE85
)

// Philox4x32 returns the 4×32-bit block for counter ctr and key key after 10 rounds.
func Philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	c, k := ctr, key
	for r := 0; r < 10; r++ {
		if r > 0 {
			k[0] += philoxW0
			k[1] += philoxW1
		}
		p0 := uint64(philoxM0) * uint64(c[0])
		p1 := uint64(philoxM1) * uint64(c[2])
		c = [4]uint32{uint32(p1>>32) ^ c[1] ^ k[0], uint32(p1), uint32(p0>>32) ^ c[3] ^ k[1], uint32(p0)}
	}
	return c
}

// PhiloxSlices is how many dropout draws one Philox block gives: its 128 bits as eight 16-bit slices.
const PhiloxSlices = 8

// PhiloxUniform returns the uniform draw in [0, 1) for element i of a stream (seed, offset): element i reads
// 16-bit slice i%8 of the block at counter offset + i/8 (the counter as two 32-bit words, low first, upper two
// words 0; key = low, high 32 bits of seed), slice 2k being the low and 2k+1 the high half of word k, and maps
// it to slice·2⁻¹⁶. Exactly representable in float32. Eight draws per block (as FlashAttention-2 takes 8-bit
// slices for its dropout, here with 16 bits so that a probability is quantised to 2⁻¹⁶ instead of 2⁻⁸).
func PhiloxUniform(seed, offset uint64, i int) float32 {
	return float32(PhiloxDraw(seed, offset, i)) * (1.0 / (1 << 16))
}

// PhiloxDraw is PhiloxUniform's 16-bit slice itself (PhiloxUniform = PhiloxDraw·2⁻¹⁶).
func PhiloxDraw(seed, offset uint64, i int) uint32 {
	ctr := offset + uint64(i)/PhiloxSlices
	blk := Philox4x32([4]uint32{uint32(ctr), uint32(ctr >> 32), 0, 0}, [2]uint32{uint32(seed), uint32(seed >> 32)})
	return PhiloxSlice(blk, i%PhiloxSlices)
}

// PhiloxSlice returns 16-bit slice s (0 … 7) of a Philox block: the low (s even) or high (s odd) half of word s/2.
func PhiloxSlice(blk [4]uint32, s int) uint32 { return blk[s/2] >> (16 * (s % 2)) & 0xffff }

// PhiloxKeep reports whether dropout with probability p keeps element i of stream (seed, offset): it keeps when
// PhiloxUniform(seed, offset, i) >= p, i.e. when PhiloxDraw ≥ PhiloxThreshold(p), so each element is dropped
// with probability ⌈p·2¹⁶⌉·2⁻¹⁶ (p quantised up to a multiple of 2⁻¹⁶: 0.1 → 0.1000061).
func PhiloxKeep(seed, offset uint64, i int, p float32) bool {
	return PhiloxUniform(seed, offset, i) >= p
}

// PhiloxThreshold is PhiloxKeep's test in integer form: slice·2⁻¹⁶ ≥ p ⇔ slice ≥ ⌈p·2¹⁶⌉ (p·2¹⁶ is exact).
func PhiloxThreshold(p float32) uint32 { return uint32(math.Ceil(float64(p) * (1 << 16))) }

// PhiloxCounters returns how far a call that draws n elements advances the stream's offset: ceil(n/8). A caller
// that draws several masks from one seed adds this to its offset after each call so no two masks share draws.
func PhiloxCounters(n int) uint64 { return uint64((n + PhiloxSlices - 1) / PhiloxSlices) }
