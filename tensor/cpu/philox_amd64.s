//go:build amd64 && !purego

#include "textflag.h"

// func philox16AVX512(ctr *[32]uint32, key0, key1 uint32, out *[64]uint32)
//
// Sixteen Philox 4x32-10 blocks at once (Salmon et al., SC'11; the scalar reference is tensor.Philox4x32): block
// j has counter words (ctr[j], ctr[16+j], 0, 0) and key (key0, key1); word w of block j is stored at out[16w + j].
// Each ZMM holds one counter word of the 16 blocks. A round's 32×32→64-bit products: VPMULLD gives the low
// halves; VPMULUDQ multiplies the even dword lanes (and, after a 32-bit shift, the odd ones) to 64 bits, whose
// high halves are merged back into dword lanes.
TEXT ·philox16AVX512(SB), NOSPLIT, $0-24
	MOVQ ctr+0(FP), AX
	MOVL key0+8(FP), BX
	MOVL key1+12(FP), CX
	MOVQ out+16(FP), DX
	VMOVDQU32 (AX), Z0
	VMOVDQU32 64(AX), Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPBROADCASTD BX, Z4
	VPBROADCASTD CX, Z5
	MOVL $0xD2511F53, R8
	VPBROADCASTD R8, Z6
	MOVL $0xCD9E8D57, R9
	VPBROADCASTD R9, Z7
	MOVL $0x9E3779B9, R10
	VPBROADCASTD R10, Z8
	MOVL $0xBB67AE85, R11
	VPBROADCASTD R11, Z9
	MOVQ $0xFFFFFFFF00000000, R12
	VPBROADCASTQ R12, Z10
	MOVQ $10, SI

philox_round:
	// p0 = M0·c0: low halves in Z11, high halves in Z12
	VPMULLD Z6, Z0, Z11
	VPMULUDQ Z6, Z0, Z12
	VPSRLQ $32, Z0, Z13
	VPMULUDQ Z6, Z13, Z13
	VPSRLQ $32, Z12, Z12
	VPANDQ Z10, Z13, Z13
	VPORQ Z13, Z12, Z12
	// p1 = M1·c2: low halves in Z14, high halves in Z15
	VPMULLD Z7, Z2, Z14
	VPMULUDQ Z7, Z2, Z15
	VPSRLQ $32, Z2, Z16
	VPMULUDQ Z7, Z16, Z16
	VPSRLQ $32, Z15, Z15
	VPANDQ Z10, Z16, Z16
	VPORQ Z16, Z15, Z15
	// (c0, c1, c2, c3) = (hi(p1) ^ c1 ^ k0, lo(p1), hi(p0) ^ c3 ^ k1, lo(p0))
	VPXORD Z1, Z15, Z0
	VPXORD Z4, Z0, Z0
	VPXORD Z3, Z12, Z2
	VPXORD Z5, Z2, Z2
	VMOVDQA32 Z14, Z1
	VMOVDQA32 Z11, Z3
	// the key schedule: k += (W0, W1) before each later round
	VPADDD Z8, Z4, Z4
	VPADDD Z9, Z5, Z5
	DECQ SI
	JNE philox_round

	VMOVDQU32 Z0, (DX)
	VMOVDQU32 Z1, 64(DX)
	VMOVDQU32 Z2, 128(DX)
	VMOVDQU32 Z3, 192(DX)
	VZEROUPPER
	RET
