package tensor

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

// PhiloxUniform returns the uniform draw in [0, 1) for element i of a stream (seed, offset): element i reads
// lane i%4 of the block at counter offset + i/4 (as two 32-bit words, low first, upper two words 0) under key
// (low, high 32 bits of seed), and maps its top 24 bits to (x>>8)·2⁻²⁴. Exactly representable in float32.
func PhiloxUniform(seed, offset uint64, i int) float32 {
	ctr := offset + uint64(i)/4
	blk := Philox4x32([4]uint32{uint32(ctr), uint32(ctr >> 32), 0, 0}, [2]uint32{uint32(seed), uint32(seed >> 32)})
	return float32(blk[i%4]>>8) * (1.0 / (1 << 24))
}

// PhiloxKeep reports whether dropout with probability p keeps element i of stream (seed, offset): it keeps when
// PhiloxUniform(seed, offset, i) >= p, so each element is kept with probability 1 − p.
func PhiloxKeep(seed, offset uint64, i int, p float32) bool {
	return PhiloxUniform(seed, offset, i) >= p
}

// PhiloxCounters returns how far a call that draws n elements advances the stream's offset: ceil(n/4). A caller
// that draws several masks from one seed adds this to its offset after each call so no two masks share draws.
func PhiloxCounters(n int) uint64 { return uint64((n + 3) / 4) }
