//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// philox16AVX512 computes 16 Philox blocks (philox_amd64.s).
//
//go:noescape
func philox16AVX512(ctr *[32]uint32, key0, key1 uint32, out *[64]uint32)

// philox16 fills out with the 16 Philox 4x32-10 blocks of counters ctr0 … ctr0+15 under key (word w of block j at
// out[16w + j]), each equal to tensor.Philox4x32([4]uint32{lo, hi, 0, 0}, key); nil when the processor has no
// AVX-512 (the callers then use tensor.Philox4x32 block by block).
var philox16 func(ctr0 uint64, key [2]uint32, out *[64]uint32)

func init() {
	if cpu.X86.HasAVX512F {
		philox16 = philox16Fill
	}
}

// philox16Fill is philox16 where the processor has AVX-512. Called directly (not through the variable), its out
// does not escape, so a caller's [64]uint32 stays on the stack.
func philox16Fill(ctr0 uint64, key [2]uint32, out *[64]uint32) {
	var ctr [32]uint32
	for j := range 16 {
		c := ctr0 + uint64(j)
		ctr[j], ctr[16+j] = uint32(c), uint32(c>>32)
	}
	philox16AVX512(&ctr, key[0], key[1], out)
}
