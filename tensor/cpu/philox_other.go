//go:build !amd64 || purego

package cpu

// philox16 has no vector implementation on this architecture (see philox_amd64.go).
var philox16 func(ctr0 uint64, key [2]uint32, out *[64]uint32)

func philox16Fill(ctr0 uint64, key [2]uint32, out *[64]uint32) { panic("unreachable") }
