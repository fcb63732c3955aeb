//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 kernels for small products and elementwise ops (simd_amd64.go holds their Go contracts). Tails are
// handled with masked loads and stores, which do not fault on the masked-off elements.

// LOOKUP loads, for the eight lanes of Y3 (2i, 0 in lanes outside the table), the four contiguous float64
// (Φ(x_i), φ(x_i), Φ(x_i+1), φ(x_i+1)) of normTable at DX by one 32-byte load per lane, and transposes them into
// Z10 = a0, Z11 = a1, Z12 = b0, Z13 = b1 (lane order kept). Gathers would be simpler but are several times
// slower on some processors (AMD Zen 4). Uses 0(SP)…31(SP), R9, Z6–Z9, Y14–Y17; Z29/Z30 hold the permutations.
#define LOOKUP \
	VMOVDQA32.Z   Y3, K2, Y3 \
	VMOVD         X3, R9 \
	VMOVUPD       (DX)(R9*8), Y6 \
	VPEXTRD       $1, X3, R9 \
	VMOVUPD       (DX)(R9*8), Y7 \
	VPEXTRD       $2, X3, R9 \
	VMOVUPD       (DX)(R9*8), Y8 \
	VPEXTRD       $3, X3, R9 \
	VMOVUPD       (DX)(R9*8), Y9 \
	VEXTRACTI32X4 $1, Y3, X3 \
	VMOVD         X3, R9 \
	VMOVUPD       (DX)(R9*8), Y14 \
	VPEXTRD       $1, X3, R9 \
	VMOVUPD       (DX)(R9*8), Y15 \
	VPEXTRD       $2, X3, R9 \
	VMOVUPD       (DX)(R9*8), Y16 \
	VPEXTRD       $3, X3, R9 \
	VMOVUPD       (DX)(R9*8), Y17 \
	VINSERTF64X4  $1, Y14, Z6, Z6 \
	VINSERTF64X4  $1, Y15, Z7, Z7 \
	VINSERTF64X4  $1, Y16, Z8, Z8 \
	VINSERTF64X4  $1, Y17, Z9, Z9 \
	VUNPCKLPD     Z7, Z6, Z10 \
	VUNPCKHPD     Z7, Z6, Z11 \
	VUNPCKLPD     Z9, Z8, Z12 \
	VUNPCKHPD     Z9, Z8, Z13 \
	VMOVAPD       Z29, Z6 \
	VPERMI2PD     Z12, Z10, Z6 \
	VMOVAPD       Z30, Z7 \
	VPERMI2PD     Z12, Z10, Z7 \
	VMOVAPD       Z29, Z8 \
	VPERMI2PD     Z13, Z11, Z8 \
	VMOVAPD       Z30, Z9 \
	VPERMI2PD     Z13, Z11, Z9 \
	VMOVAPD       Z6, Z10 \
	VMOVAPD       Z8, Z11 \
	VMOVAPD       Z7, Z12 \
	VMOVAPD       Z9, Z13

// The permutations of LOOKUP: a0/a1 from the unpacked pairs' low halves, b0/b1 from their high halves.
DATA permA<>+0(SB)/8, $0
DATA permA<>+8(SB)/8, $1
DATA permA<>+16(SB)/8, $8
DATA permA<>+24(SB)/8, $9
DATA permA<>+32(SB)/8, $4
DATA permA<>+40(SB)/8, $5
DATA permA<>+48(SB)/8, $12
DATA permA<>+56(SB)/8, $13
GLOBL permA<>(SB), RODATA|NOPTR, $64
DATA permB<>+0(SB)/8, $2
DATA permB<>+8(SB)/8, $3
DATA permB<>+16(SB)/8, $10
DATA permB<>+24(SB)/8, $11
DATA permB<>+32(SB)/8, $6
DATA permB<>+40(SB)/8, $7
DATA permB<>+48(SB)/8, $14
DATA permB<>+56(SB)/8, $15
GLOBL permB<>(SB), RODATA|NOPTR, $64

// func sgemmSmallAVX512(m, n, k int, a *float32, rsa, csa int, b *float32, ldb int, c *float32, ldc int, alpha float32, acc bool)
//
// c[i·ldc + j] (+)= alpha · Σ_p a[i·rsa + p·csa] · b[p·ldb + j] for i < m, j < n, p < k, the sum over p in
// order with one FMA per term. Four rows of C at a time (four accumulators share each row of B), 16 columns per
// ZMM; then the remaining rows one at a time.
TEXT ·sgemmSmallAVX512(SB), NOSPLIT, $0-85
	MOVQ m+0(FP), R8
	MOVQ a+24(FP), SI
	MOVQ rsa+32(FP), R11
	SHLQ $2, R11
	MOVQ csa+40(FP), R12
	SHLQ $2, R12
	MOVQ b+48(FP), BX
	MOVQ ldb+56(FP), R13
	SHLQ $2, R13
	MOVQ c+64(FP), DI
	MOVQ ldc+72(FP), R14
	SHLQ $2, R14
	VBROADCASTSS alpha+80(FP), Z31
	LEAQ (R11)(R11*2), AX // 3·rsa bytes
	LEAQ (R14)(R14*2), DX // 3·ldc bytes

rows4:
	CMPQ R8, $4
	JLT  rows1
	XORQ CX, CX // j0

cols4:
	CMPQ CX, n+8(FP)
	JGE  next4
	MOVQ n+8(FP), R10
	SUBQ CX, R10
	MOVL $0xFFFF, R9
	CMPQ R10, $16
	JLE  narrow4
	// more than 16 columns left: 4 × 32 (eight accumulators), K2 masks columns 16…31
	SUBQ $16, R10
	MOVL $0xFFFF, R9
	CMPQ R10, $16
	JGE  wmask
	MOVQ CX, R15
	MOVQ R10, CX
	MOVL $1, R9
	SHLL CX, R9
	DECL R9
	MOVQ R15, CX

wmask:
	KMOVW  R9, K2
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	MOVQ   SI, R15
	LEAQ   (BX)(CX*4), R9
	MOVQ   k+16(FP), R10
	TESTQ  R10, R10
	JZ     wstore

wloop:
	VMOVUPS          (R9), Z4
	VMOVUPS.Z        64(R9), K2, Z5
	VBROADCASTSS     (R15), Z10
	VFMADD231PS      Z10, Z4, Z0
	VFMADD231PS      Z10, Z5, Z6
	VBROADCASTSS     (R15)(R11*1), Z10
	VFMADD231PS      Z10, Z4, Z1
	VFMADD231PS      Z10, Z5, Z7
	VBROADCASTSS     (R15)(R11*2), Z10
	VFMADD231PS      Z10, Z4, Z2
	VFMADD231PS      Z10, Z5, Z8
	VBROADCASTSS     (R15)(AX*1), Z10
	VFMADD231PS      Z10, Z4, Z3
	VFMADD231PS      Z10, Z5, Z9
	ADDQ             R12, R15
	ADDQ             R13, R9
	DECQ             R10
	JNZ              wloop

wstore:
	VMULPS Z31, Z0, Z0
	VMULPS Z31, Z1, Z1
	VMULPS Z31, Z2, Z2
	VMULPS Z31, Z3, Z3
	VMULPS Z31, Z6, Z6
	VMULPS Z31, Z7, Z7
	VMULPS Z31, Z8, Z8
	VMULPS Z31, Z9, Z9
	LEAQ   (DI)(CX*4), R9
	CMPB   acc+84(FP), $0
	JEQ    wput
	VADDPS    (R9), Z0, Z0
	VMOVUPS.Z 64(R9), K2, Z5
	VADDPS    Z5, Z6, Z6
	VADDPS    (R9)(R14*1), Z1, Z1
	VMOVUPS.Z 64(R9)(R14*1), K2, Z5
	VADDPS    Z5, Z7, Z7
	VADDPS    (R9)(R14*2), Z2, Z2
	VMOVUPS.Z 64(R9)(R14*2), K2, Z5
	VADDPS    Z5, Z8, Z8
	VADDPS    (R9)(DX*1), Z3, Z3
	VMOVUPS.Z 64(R9)(DX*1), K2, Z5
	VADDPS    Z5, Z9, Z9

wput:
	VMOVUPS Z0, (R9)
	VMOVUPS Z6, K2, 64(R9)
	VMOVUPS Z1, (R9)(R14*1)
	VMOVUPS Z7, K2, 64(R9)(R14*1)
	VMOVUPS Z2, (R9)(R14*2)
	VMOVUPS Z8, K2, 64(R9)(R14*2)
	VMOVUPS Z3, (R9)(DX*1)
	VMOVUPS Z9, K2, 64(R9)(DX*1)
	ADDQ    $32, CX
	JMP     cols4

narrow4:
	CMPQ R10, $16
	JGE  full4
	MOVQ CX, R15
	MOVQ R10, CX
	MOVL $1, R9
	SHLL CX, R9
	DECL R9
	MOVQ R15, CX

full4:
	KMOVW R9, K1
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ  SI, R15
	LEAQ  (BX)(CX*4), R9
	MOVQ  k+16(FP), R10
	TESTQ R10, R10
	JZ    store4

loop4:
	VMOVUPS.Z        (R9), K1, Z4
	VFMADD231PS.BCST (R15), Z4, Z0
	VFMADD231PS.BCST (R15)(R11*1), Z4, Z1
	VFMADD231PS.BCST (R15)(R11*2), Z4, Z2
	VFMADD231PS.BCST (R15)(AX*1), Z4, Z3
	ADDQ             R12, R15
	ADDQ             R13, R9
	DECQ             R10
	JNZ              loop4

store4:
	VMULPS Z31, Z0, Z0
	VMULPS Z31, Z1, Z1
	VMULPS Z31, Z2, Z2
	VMULPS Z31, Z3, Z3
	LEAQ   (DI)(CX*4), R9
	CMPB   acc+84(FP), $0
	JEQ    put4
	VMOVUPS.Z (R9), K1, Z5
	VADDPS    Z5, Z0, Z0
	VMOVUPS.Z (R9)(R14*1), K1, Z5
	VADDPS    Z5, Z1, Z1
	VMOVUPS.Z (R9)(R14*2), K1, Z5
	VADDPS    Z5, Z2, Z2
	VMOVUPS.Z (R9)(DX*1), K1, Z5
	VADDPS    Z5, Z3, Z3

put4:
	VMOVUPS Z0, K1, (R9)
	VMOVUPS Z1, K1, (R9)(R14*1)
	VMOVUPS Z2, K1, (R9)(R14*2)
	VMOVUPS Z3, K1, (R9)(DX*1)
	ADDQ    $16, CX
	JMP     cols4

next4:
	LEAQ (SI)(R11*4), SI
	LEAQ (DI)(R14*4), DI
	SUBQ $4, R8
	JMP  rows4

rows1:
	TESTQ R8, R8
	JZ    done
	XORQ  CX, CX

cols1:
	CMPQ CX, n+8(FP)
	JGE  next1
	MOVQ n+8(FP), R10
	SUBQ CX, R10
	MOVL $0xFFFF, R9
	CMPQ R10, $16
	JGE  full1
	MOVQ CX, R15
	MOVQ R10, CX
	MOVL $1, R9
	SHLL CX, R9
	DECL R9
	MOVQ R15, CX

full1:
	KMOVW R9, K1
	VPXORD Z0, Z0, Z0
	MOVQ  SI, R15
	LEAQ  (BX)(CX*4), R9
	MOVQ  k+16(FP), R10
	TESTQ R10, R10
	JZ    store1

loop1:
	VMOVUPS.Z        (R9), K1, Z4
	VFMADD231PS.BCST (R15), Z4, Z0
	ADDQ             R12, R15
	ADDQ             R13, R9
	DECQ             R10
	JNZ              loop1

store1:
	VMULPS Z31, Z0, Z0
	LEAQ   (DI)(CX*4), R9
	CMPB   acc+84(FP), $0
	JEQ    put1
	VMOVUPS.Z (R9), K1, Z5
	VADDPS    Z5, Z0, Z0

put1:
	VMOVUPS Z0, K1, (R9)
	ADDQ    $16, CX
	JMP     cols1

next1:
	ADDQ R11, SI
	ADDQ R14, DI
	DECQ R8
	JMP  rows1

done:
	VZEROUPPER
	RET

// func expShiftSumAVX512(x *float32, n int, shift float32) float32
//
// x[i] = exp(x[i] − shift) for i < n, and returns Σ x[i] (16 lane sums, then the lanes in a fixed tree).
// exp as in Cephes expf (S. L. Moshier, Cephes Math Library, expf.c): x clamped to [−104, 88.376], k =
// round(x·log₂e), r = x − k·C1 − k·C2 (ln 2 = C1 + C2 split so that k·C1 is exact), exp(r) by a degree-7
// polynomial (1 + r + r²·P(r)), scaled by 2^k with VSCALEFPS, which rounds gradual underflow correctly and gives 0
// below about −103.3 (so −Inf gives 0). NaN propagates. Error ≤ 2 ulp (see TestExpShiftSum).
TEXT ·expShiftSumAVX512(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), R8
	VBROADCASTSS shift+16(FP), Z20
	MOVL         $0x3fb8aa3b, AX // log2(e)
	VPBROADCASTD AX, Z21
	MOVL         $0x3f318000, AX // C1
	VPBROADCASTD AX, Z22
	MOVL         $0xb95e8083, AX // C2
	VPBROADCASTD AX, Z23
	MOVL         $0x39506967, AX // P0 … P5
	VPBROADCASTD AX, Z24
	MOVL         $0x3ab743ce, AX
	VPBROADCASTD AX, Z25
	MOVL         $0x3c088908, AX
	VPBROADCASTD AX, Z26
	MOVL         $0x3d2aa9c1, AX
	VPBROADCASTD AX, Z27
	MOVL         $0x3e2aaaaa, AX
	VPBROADCASTD AX, Z28
	MOVL         $0x3f000000, AX
	VPBROADCASTD AX, Z29
	MOVL         $0x3f800000, AX // 1
	VPBROADCASTD AX, Z30
	MOVL         $0x42b0c0a5, AX // upper clamp
	VPBROADCASTD AX, Z18
	MOVL         $0xc2d00000, AX // lower clamp −104
	VPBROADCASTD AX, Z17
	VPXORD       Z19, Z19, Z19

exploop:
	TESTQ R8, R8
	JLE   expsum
	MOVL  $0xFFFF, R9
	CMPQ  R8, $16
	JGE   expfull
	MOVQ  R8, CX
	MOVL  $1, R9
	SHLL  CX, R9
	DECL  R9

expfull:
	KMOVW        R9, K1
	VMOVUPS.Z    (SI), K1, Z0
	VSUBPS       Z20, Z0, Z0
	VMINPS       Z0, Z18, Z0
	VMAXPS       Z0, Z17, Z0
	VMULPS       Z21, Z0, Z1
	VRNDSCALEPS  $0, Z1, Z1
	VFNMADD231PS Z22, Z1, Z0
	VFNMADD231PS Z23, Z1, Z0
	VMOVAPS      Z24, Z2
	VFMADD213PS  Z25, Z0, Z2
	VFMADD213PS  Z26, Z0, Z2
	VFMADD213PS  Z27, Z0, Z2
	VFMADD213PS  Z28, Z0, Z2
	VFMADD213PS  Z29, Z0, Z2
	VMULPS       Z0, Z0, Z3
	VFMADD213PS  Z0, Z3, Z2
	VADDPS       Z30, Z2, Z2
	VSCALEFPS    Z1, Z2, Z2
	VMOVAPS.Z    Z2, K1, Z2
	VADDPS       Z2, Z19, Z19
	VMOVUPS      Z2, K1, (SI)
	ADDQ         $64, SI
	SUBQ         $16, R8
	JMP          exploop

expsum:
	VEXTRACTF64X4 $1, Z19, Y1
	VADDPS        Y1, Y19, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VPERMILPS     $0x4e, X0, X1
	VADDPS        X1, X0, X0
	VPERMILPS     $0xb1, X0, X1
	VADDSS        X1, X0, X0
	MOVSS         X0, ret+24(FP)
	VZEROUPPER
	RET

// The Hermite interpolation of normTable (gelu_table.go) in float64, eight elements per iteration, with
// exactly the operations of normCDF / normCDFPDF in the same order (no FMA, as the Go code compiles for amd64), so
// the results are bit-identical to geluF32 / geluBackwardF32. Lanes outside the table (|x| ≥ 8, NaN) are not
// written (out may be x, dx may be dout): the functions report whether any was met and the caller computes those
// elements from the inputs.

// func geluTableAVX512(out, x *float32, n int, table *float64) (outside bool)
TEXT ·geluTableAVX512(SB), NOSPLIT, $32-33
	MOVQ         out+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), R8
	MOVQ         table+24(FP), DX
	XORQ         BX, BX          // outside
	MOVQ         $0x4020000000000000, AX // 8
	VPBROADCASTQ AX, Z20
	MOVQ         $0x4060000000000000, AX // 128
	VPBROADCASTQ AX, Z21
	MOVQ         $0x40a0000000000000, AX // 2048
	VPBROADCASTQ AX, Z22
	VPXORQ       Z23, Z23, Z23   // 0
	MOVQ         $0x3ff0000000000000, AX // 1
	VPBROADCASTQ AX, Z24
	MOVQ         $0x4008000000000000, AX // 3
	VPBROADCASTQ AX, Z25
	MOVQ         $0x3f80000000000000, AX // h = 1/128
	VPBROADCASTQ AX, Z26
	VMOVDQU64    permA<>(SB), Z29
	VMOVDQU64    permB<>(SB), Z30

gfloop:
	TESTQ R8, R8
	JLE   gfdone
	MOVL  $0xFF, R9
	CMPQ  R8, $8
	JGE   gffull
	MOVQ  R8, CX
	MOVL  $1, R9
	SHLL  CX, R9
	DECL  R9

gffull:
	KMOVW      R9, K1
	VMOVUPS.Z  (SI), K1, Y0
	VCVTPS2PD  Y0, Z1             // f
	VADDPD     Z20, Z1, Z2
	VMULPD     Z21, Z2, Z2        // u = (f + 8)·128
	VCMPPD     $0x1d, Z23, Z2, K1, K2 // u ≥ 0
	VCMPPD     $0x11, Z22, Z2, K2, K2 // u < 2048
	KXORW      K1, K2, K3
	KORTESTW   K3, K3
	JZ         gfin
	MOVQ       $1, BX

gfin:
	VCVTTPD2DQ Z2, Y3             // i
	VCVTDQ2PD  Y3, Z4
	VSUBPD     Z4, Z2, Z5         // t
	VPSLLD     $1, Y3, Y3         // 2i: the index of table[i][0] in float64 units
	LOOKUP
	VSUBPD     Z5, Z24, Z6        // s = 1 − t
	VADDPD     Z5, Z5, Z7         // 2t
	VADDPD     Z7, Z24, Z8        // 1 + 2t
	VMULPD     Z6, Z8, Z8
	VMULPD     Z6, Z8, Z8
	VMULPD     Z10, Z8, Z8        // (1+2t)·s·s·a0
	VMULPD     Z6, Z5, Z9
	VMULPD     Z6, Z9, Z9
	VMULPD     Z26, Z9, Z9
	VMULPD     Z11, Z9, Z9        // t·s·s·h·a1
	VADDPD     Z9, Z8, Z8
	VMULPD     Z5, Z5, Z14        // t·t
	VSUBPD     Z7, Z25, Z15       // 3 − 2t
	VMULPD     Z15, Z14, Z15
	VMULPD     Z12, Z15, Z15      // t·t·(3−2t)·b0
	VADDPD     Z15, Z8, Z8
	VMULPD     Z6, Z14, Z14
	VMULPD     Z26, Z14, Z14
	VMULPD     Z13, Z14, Z14      // t·t·s·h·b1
	VSUBPD     Z14, Z8, Z8        // Φ
	VMULPD     Z8, Z1, Z8         // f·Φ
	VCVTPD2PS  Z8, Y8
	VMOVUPS    Y8, K2, (DI)      // in-table lanes only: out may be x, and the caller reads x (and dout) of the others
	ADDQ       $32, SI
	ADDQ       $32, DI
	SUBQ       $8, R8
	JMP        gfloop

gfdone:
	MOVB BX, outside+32(FP)
	VZEROUPPER
	RET

// func geluBackwardTableAVX512(dx, dout, x *float32, n int, table *float64) (outside bool)
TEXT ·geluBackwardTableAVX512(SB), NOSPLIT, $32-41
	MOVQ         dx+0(FP), DI
	MOVQ         dout+8(FP), R10
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), R8
	MOVQ         table+32(FP), DX
	XORQ         BX, BX
	MOVQ         $0x4020000000000000, AX // 8
	VPBROADCASTQ AX, Z20
	MOVQ         $0x4060000000000000, AX // 128
	VPBROADCASTQ AX, Z21
	MOVQ         $0x40a0000000000000, AX // 2048
	VPBROADCASTQ AX, Z22
	VPXORQ       Z23, Z23, Z23
	MOVQ         $0x3ff0000000000000, AX // 1
	VPBROADCASTQ AX, Z24
	MOVQ         $0x4008000000000000, AX // 3
	VPBROADCASTQ AX, Z25
	MOVQ         $0x3f80000000000000, AX // h
	VPBROADCASTQ AX, Z26
	MOVQ         $0xc020000000000000, AX // −8
	VPBROADCASTQ AX, Z27
	MOVQ         $0x8000000000000000, AX // sign bit
	VPBROADCASTQ AX, Z28
	VMOVDQU64    permA<>(SB), Z29
	VMOVDQU64    permB<>(SB), Z30

gbloop:
	TESTQ R8, R8
	JLE   gbdone
	MOVL  $0xFF, R9
	CMPQ  R8, $8
	JGE   gbfull
	MOVQ  R8, CX
	MOVL  $1, R9
	SHLL  CX, R9
	DECL  R9

gbfull:
	KMOVW      R9, K1
	VMOVUPS.Z  (SI), K1, Y0
	VCVTPS2PD  Y0, Z1
	VADDPD     Z20, Z1, Z2
	VMULPD     Z21, Z2, Z2
	VCMPPD     $0x1d, Z23, Z2, K1, K2
	VCMPPD     $0x11, Z22, Z2, K2, K2
	KXORW      K1, K2, K3
	KORTESTW   K3, K3
	JZ         gbin
	MOVQ       $1, BX

gbin:
	VCVTTPD2DQ Z2, Y3
	VCVTDQ2PD  Y3, Z4             // float64(i)
	VSUBPD     Z4, Z2, Z5         // t
	VMULPD     Z26, Z4, Z4
	VADDPD     Z4, Z27, Z4        // x0 = −8 + i·h
	VPSLLD     $1, Y3, Y3
	LOOKUP
	VSUBPD     Z5, Z24, Z6        // s
	VADDPD     Z5, Z5, Z7         // 2t
	VADDPD     Z7, Z24, Z8
	VMULPD     Z6, Z8, Z8
	VMULPD     Z6, Z8, Z8         // h00 = (1+2t)·s·s
	VMULPD     Z6, Z5, Z9
	VMULPD     Z6, Z9, Z9
	VMULPD     Z26, Z9, Z9        // h10 = t·s·s·h
	VMULPD     Z5, Z5, Z14
	VSUBPD     Z7, Z25, Z15
	VMULPD     Z15, Z14, Z15      // h01 = t·t·(3−2t)
	VPXORQ     Z28, Z5, Z16       // −t
	VMULPD     Z5, Z16, Z16
	VMULPD     Z6, Z16, Z16
	VMULPD     Z26, Z16, Z16      // h11 = −t·t·s·h
	// cdf = h00·a0 + h10·a1 + h01·b0 + h11·b1
	VMULPD     Z10, Z8, Z17
	VMULPD     Z11, Z9, Z18
	VADDPD     Z18, Z17, Z17
	VMULPD     Z12, Z15, Z18
	VADDPD     Z18, Z17, Z17
	VMULPD     Z13, Z16, Z18
	VADDPD     Z18, Z17, Z17
	// pdf = h00·a1 − h10·x0·a1 + h01·b1 − h11·(x0+h)·b1
	VMULPD     Z11, Z8, Z18
	VMULPD     Z4, Z9, Z19
	VMULPD     Z11, Z19, Z19
	VSUBPD     Z19, Z18, Z18
	VMULPD     Z13, Z15, Z19
	VADDPD     Z19, Z18, Z18
	VADDPD     Z26, Z4, Z19
	VMULPD     Z19, Z16, Z19
	VMULPD     Z13, Z19, Z19
	VSUBPD     Z19, Z18, Z18
	// dx = dout·float32(cdf + f·pdf)
	VMULPD     Z18, Z1, Z18
	VADDPD     Z18, Z17, Z17
	VCVTPD2PS  Z17, Y17
	VMOVUPS.Z  (R10), K1, Y18
	VMULPS     Y18, Y17, Y17
	VMOVUPS    Y17, K2, (DI)
	ADDQ       $32, SI
	ADDQ       $32, DI
	ADDQ       $32, R10
	SUBQ       $8, R8
	JMP        gbloop

gbdone:
	MOVB BX, outside+40(FP)
	VZEROUPPER
	RET

// func dropApply64AVX512(out, x *float32, wide *[64]uint32, threshold uint32, scale float32)
//
// out[e] = x[e]·(scale if wide[(e%4)·16 + e/4]>>8 ≥ threshold else 0) for e < 64: the keep masks of the four
// words (16 bits each, bit j for element 4j + w) are interleaved into one 64-bit mask with PDEP (BMI2), then
// each 16-element group multiplies by its factors (0·NaN stays NaN, as in dropoutKernel).
TEXT ·dropApply64AVX512(SB), NOSPLIT, $0-32
	MOVQ         out+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         wide+16(FP), DX
	MOVL         threshold+24(FP), AX
	VPBROADCASTD AX, Z20
	VBROADCASTSS scale+28(FP), Z21
	XORQ         BX, BX
	VMOVDQU32    (DX), Z0
	VPSRLD       $8, Z0, Z0
	VPCMPUD      $5, Z20, Z0, K1
	KMOVW        K1, AX
	MOVQ         $0x1111111111111111, CX
	PDEPQ        CX, AX, AX
	ORQ          AX, BX
	VMOVDQU32    64(DX), Z0
	VPSRLD       $8, Z0, Z0
	VPCMPUD      $5, Z20, Z0, K1
	KMOVW        K1, AX
	SHLQ         $1, CX
	PDEPQ        CX, AX, AX
	ORQ          AX, BX
	VMOVDQU32    128(DX), Z0
	VPSRLD       $8, Z0, Z0
	VPCMPUD      $5, Z20, Z0, K1
	KMOVW        K1, AX
	SHLQ         $1, CX
	PDEPQ        CX, AX, AX
	ORQ          AX, BX
	VMOVDQU32    192(DX), Z0
	VPSRLD       $8, Z0, Z0
	VPCMPUD      $5, Z20, Z0, K1
	KMOVW        K1, AX
	SHLQ         $1, CX
	PDEPQ        CX, AX, AX
	ORQ          AX, BX
	KMOVQ        BX, K1
	VMOVAPS.Z    Z21, K1, Z1
	KSHIFTRQ     $16, K1, K1
	VMULPS       (SI), Z1, Z1
	VMOVUPS      Z1, (DI)
	VMOVAPS.Z    Z21, K1, Z1
	KSHIFTRQ     $16, K1, K1
	VMULPS       64(SI), Z1, Z1
	VMOVUPS      Z1, 64(DI)
	VMOVAPS.Z    Z21, K1, Z1
	KSHIFTRQ     $16, K1, K1
	VMULPS       128(SI), Z1, Z1
	VMOVUPS      Z1, 128(DI)
	VMOVAPS.Z    Z21, K1, Z1
	VMULPS       192(SI), Z1, Z1
	VMOVUPS      Z1, 192(DI)
	VZEROUPPER
	RET

// The row kernels of the fast attention (attention_fast.go). EXPCONST loads expShiftSumAVX512's constants
// (Z17, Z18, Z21–Z30); EXPZ0 sets Z2 = exp(Z0) as that function does (Z0, Z1, Z3 clobbered); TAILMASK sets K1 to
// the min(R11, 16) low lanes (AX, R9 clobbered).
#define EXPCONST \
	MOVL         $0x3fb8aa3b, AX \
	VPBROADCASTD AX, Z21 \
	MOVL         $0x3f318000, AX \
	VPBROADCASTD AX, Z22 \
	MOVL         $0xb95e8083, AX \
	VPBROADCASTD AX, Z23 \
	MOVL         $0x39506967, AX \
	VPBROADCASTD AX, Z24 \
	MOVL         $0x3ab743ce, AX \
	VPBROADCASTD AX, Z25 \
	MOVL         $0x3c088908, AX \
	VPBROADCASTD AX, Z26 \
	MOVL         $0x3d2aa9c1, AX \
	VPBROADCASTD AX, Z27 \
	MOVL         $0x3e2aaaaa, AX \
	VPBROADCASTD AX, Z28 \
	MOVL         $0x3f000000, AX \
	VPBROADCASTD AX, Z29 \
	MOVL         $0x3f800000, AX \
	VPBROADCASTD AX, Z30 \
	MOVL         $0x42b0c0a5, AX \
	VPBROADCASTD AX, Z18 \
	MOVL         $0xc2d00000, AX \
	VPBROADCASTD AX, Z17

#define EXPZ0 \
	VMINPS       Z0, Z18, Z0 \
	VMAXPS       Z0, Z17, Z0 \
	VMULPS       Z21, Z0, Z1 \
	VRNDSCALEPS  $0, Z1, Z1 \
	VFNMADD231PS Z22, Z1, Z0 \
	VFNMADD231PS Z23, Z1, Z0 \
	VMOVAPS      Z24, Z2 \
	VFMADD213PS  Z25, Z0, Z2 \
	VFMADD213PS  Z26, Z0, Z2 \
	VFMADD213PS  Z27, Z0, Z2 \
	VFMADD213PS  Z28, Z0, Z2 \
	VFMADD213PS  Z29, Z0, Z2 \
	VMULPS       Z0, Z0, Z3 \
	VFMADD213PS  Z0, Z3, Z2 \
	VADDPS       Z30, Z2, Z2 \
	VSCALEFPS    Z1, Z2, Z2

#define TAILMASK \
	MOVQ    $16, R9 \
	CMPQ    R11, R9 \
	CMOVQLT R11, R9 \
	LEAQ    lowmask<>(SB), AX \
	MOVWLZX (AX)(R9*2), AX \
	KMOVW   AX, K1

// HSUM19 leaves the sum of Z19's lanes in X0 (the same tree as expShiftSumAVX512).
#define HSUM19 \
	VEXTRACTF64X4 $1, Z19, Y1 \
	VADDPS        Y1, Y19, Y0 \
	VEXTRACTF128  $1, Y0, X1 \
	VADDPS        X1, X0, X0 \
	VPERMILPS     $0x4e, X0, X1 \
	VADDPS        X1, X0, X0 \
	VPERMILPS     $0xb1, X0, X1 \
	VADDSS        X1, X0, X0

// lowmask[i] = 2^i − 1 for i = 0 … 16.
DATA lowmask<>+0(SB)/2, $0x0000
DATA lowmask<>+2(SB)/2, $0x0001
DATA lowmask<>+4(SB)/2, $0x0003
DATA lowmask<>+6(SB)/2, $0x0007
DATA lowmask<>+8(SB)/2, $0x000f
DATA lowmask<>+10(SB)/2, $0x001f
DATA lowmask<>+12(SB)/2, $0x003f
DATA lowmask<>+14(SB)/2, $0x007f
DATA lowmask<>+16(SB)/2, $0x00ff
DATA lowmask<>+18(SB)/2, $0x01ff
DATA lowmask<>+20(SB)/2, $0x03ff
DATA lowmask<>+22(SB)/2, $0x07ff
DATA lowmask<>+24(SB)/2, $0x0fff
DATA lowmask<>+26(SB)/2, $0x1fff
DATA lowmask<>+28(SB)/2, $0x3fff
DATA lowmask<>+30(SB)/2, $0x7fff
DATA lowmask<>+32(SB)/2, $0xffff
GLOBL lowmask<>(SB), RODATA|NOPTR, $34

// func softmaxRowsAVX512(s *float32, rows, cols int, mask, f, mx, sum *float32)
//
// For each of rows rows of s (cols each, dense): s += mask (cols values, the same for every row; nil: none),
// mx[r] = max s; if that is −Inf the row is left as it is and sum[r] = 0; else s = exp(s − mx) (EXPZ0), sum[r] =
// Σ s, then s = s·(1/sum[r]) and, when f is not nil, s ·= f (f dense like s, advancing by cols per row).
// The max propagates NaN (VMAXPS alone does not: it returns its second source when either is NaN, and a short
// row's unused lanes hold −Inf): a NaN anywhere in the row (after the mask) gives mx[r] = NaN, so the row, its
// sum and the caller's LSE are NaN as in PyTorch's softmax. K3 collects the NaN lanes (VCMPPS unordered).
TEXT ·softmaxRowsAVX512(SB), NOSPLIT, $0-56
	EXPCONST
	MOVQ         s+0(FP), SI
	MOVQ         f+32(FP), BX
	MOVQ         mx+40(FP), DI
	MOVQ         sum+48(FP), R10
	MOVQ         rows+8(FP), R8
	MOVQ         cols+16(FP), R13
	SHLQ         $2, R13 // row bytes
	MOVL         $0xff800000, AX // −Inf
	VPBROADCASTD AX, Z16
	MOVL         $0x3f800000, AX
	VMOVD        AX, X15 // 1

smrow:
	TESTQ   R8, R8
	JLE     smdone
	MOVQ    mask+24(FP), DX
	MOVQ    cols+16(FP), R11
	XORQ    R12, R12
	VMOVAPS Z16, Z5
	KXORW   K3, K3, K3

smp1:
	TESTQ     R11, R11
	JLE       smp1end
	TAILMASK
	VMOVUPS.Z (SI)(R12*1), K1, Z0
	TESTQ     DX, DX
	JZ        smnomask
	VMOVUPS.Z (DX)(R12*1), K1, Z1
	VADDPS    Z1, Z0, Z0
	VMOVUPS   Z0, K1, (SI)(R12*1)

smnomask:
	VMAXPS Z0, Z5, K1, Z5
	VCMPPS $3, Z0, Z0, K1, K2 // unordered: the NaN lanes
	KORW   K2, K3, K3
	ADDQ   $64, R12
	SUBQ   $16, R11
	JMP    smp1

smp1end:
	VEXTRACTF64X4 $1, Z5, Y6
	VMAXPS        Y6, Y5, Y5
	VEXTRACTF128  $1, Y5, X6
	VMAXPS        X6, X5, X5
	VPERMILPS     $0x4e, X5, X6
	VMAXPS        X6, X5, X5
	VPERMILPS     $0xb1, X5, X6
	VMAXPS        X6, X5, X5
	KORTESTW      K3, K3
	JZ            smhavemax
	MOVL          $0x7fc00000, AX // a NaN in the row: mx = NaN
	VMOVD         AX, X5

smhavemax:
	VMOVSS        X5, (DI)
	VUCOMISS      X16, X5
	JP            smexp
	JNE           smexp
	MOVL          $0, (R10)
	JMP           smnext

smexp:
	VBROADCASTSS X5, Z20
	VPXORD       Z19, Z19, Z19
	MOVQ         cols+16(FP), R11
	XORQ         R12, R12

smp2:
	TESTQ     R11, R11
	JLE       smp2end
	TAILMASK
	VMOVUPS.Z (SI)(R12*1), K1, Z0
	VSUBPS    Z20, Z0, Z0
	EXPZ0
	VMOVAPS.Z Z2, K1, Z2
	VADDPS    Z2, Z19, Z19
	VMOVUPS   Z2, K1, (SI)(R12*1)
	ADDQ      $64, R12
	SUBQ      $16, R11
	JMP       smp2

smp2end:
	HSUM19
	VMOVSS       X0, (R10)
	VDIVSS       X0, X15, X1
	VBROADCASTSS X1, Z4
	MOVQ         cols+16(FP), R11
	XORQ         R12, R12

smp3:
	TESTQ     R11, R11
	JLE       smnext
	TAILMASK
	VMOVUPS.Z (SI)(R12*1), K1, Z0
	VMULPS    Z4, Z0, Z0
	TESTQ     BX, BX
	JZ        smnof
	VMOVUPS.Z (BX)(R12*1), K1, Z1
	VMULPS    Z1, Z0, Z0

smnof:
	VMOVUPS Z0, K1, (SI)(R12*1)
	ADDQ    $64, R12
	SUBQ    $16, R11
	JMP     smp3

smnext:
	ADDQ  R13, SI
	TESTQ BX, BX
	JZ    smnofadv
	ADDQ  R13, BX

smnofadv:
	ADDQ $4, DI
	ADDQ $4, R10
	DECQ R8
	JMP  smrow

smdone:
	VZEROUPPER
	RET

// func softmaxBackRowsAVX512(p, dp, pd *float32, rows, cols int, mask, f, lse *float32)
//
// For each row r (p, dp, pd and f dense, cols per row; mask as softmaxRowsAVX512's): if lse[r] is −Inf, pd and
// dp are zeroed; else with P = exp(p + mask − lse[r]) and dP = dp·f (f nil: 1), Δ = Σ P·dP over the keys with
// P ≠ 0 (a forbidden key's dP may be anything), pd = P·f, dp = P·(dP − Δ) (dS), and p = P.
TEXT ·softmaxBackRowsAVX512(SB), NOSPLIT, $0-64
	EXPCONST
	MOVQ         p+0(FP), SI
	MOVQ         dp+8(FP), CX
	MOVQ         pd+16(FP), R14
	MOVQ         rows+24(FP), R8
	MOVQ         f+48(FP), BX
	MOVQ         lse+56(FP), DI
	MOVQ         cols+32(FP), R13
	SHLQ         $2, R13
	MOVL         $0xff800000, AX
	VPBROADCASTD AX, Z16
	VPXORD       Z15, Z15, Z15

sbrow:
	TESTQ    R8, R8
	JLE      sbdone
	VMOVSS   (DI), X5
	VUCOMISS X16, X5
	JP       sbgo
	JNE      sbgo
	MOVQ     cols+32(FP), R11
	XORQ     R12, R12

sbclear:
	TESTQ   R11, R11
	JLE     sbnext
	TAILMASK
	VMOVUPS Z15, K1, (R14)(R12*1)
	VMOVUPS Z15, K1, (CX)(R12*1)
	ADDQ    $64, R12
	SUBQ    $16, R11
	JMP     sbclear

sbgo:
	VBROADCASTSS X5, Z20
	VPXORD       Z19, Z19, Z19
	MOVQ         mask+40(FP), DX
	MOVQ         cols+32(FP), R11
	XORQ         R12, R12

sbp1:
	TESTQ     R11, R11
	JLE       sbp1end
	TAILMASK
	VMOVUPS.Z (SI)(R12*1), K1, Z0
	TESTQ     DX, DX
	JZ        sbnomask
	VMOVUPS.Z (DX)(R12*1), K1, Z1
	VADDPS    Z1, Z0, Z0

sbnomask:
	VSUBPS    Z20, Z0, Z0
	EXPZ0
	VMOVAPS.Z Z2, K1, Z2
	VMOVUPS   Z2, K1, (SI)(R12*1)
	VMOVUPS.Z (CX)(R12*1), K1, Z7
	TESTQ     BX, BX
	JZ        sbnof1
	VMOVUPS.Z (BX)(R12*1), K1, Z1
	VMULPS    Z1, Z7, Z7
	VMOVUPS   Z7, K1, (CX)(R12*1)

sbnof1:
	VCMPPS      $4, Z15, Z2, K1, K2
	VFMADD231PS Z7, Z2, K2, Z19
	ADDQ        $64, R12
	SUBQ        $16, R11
	JMP         sbp1

sbp1end:
	HSUM19
	VBROADCASTSS X0, Z4
	MOVQ         cols+32(FP), R11
	XORQ         R12, R12

sbp2:
	TESTQ     R11, R11
	JLE       sbnext
	TAILMASK
	VMOVUPS.Z (SI)(R12*1), K1, Z2
	VMOVUPS.Z (CX)(R12*1), K1, Z7
	VMOVAPS   Z2, Z8
	TESTQ     BX, BX
	JZ        sbnof2
	VMOVUPS.Z (BX)(R12*1), K1, Z1
	VMULPS    Z1, Z8, Z8

sbnof2:
	VMOVUPS Z8, K1, (R14)(R12*1)
	VSUBPS  Z4, Z7, Z7
	VMULPS  Z7, Z2, Z7
	VMOVUPS Z7, K1, (CX)(R12*1)
	ADDQ    $64, R12
	SUBQ    $16, R11
	JMP     sbp2

sbnext:
	ADDQ  R13, SI
	ADDQ  R13, CX
	ADDQ  R13, R14
	TESTQ BX, BX
	JZ    sbnofadv
	ADDQ  R13, BX

sbnofadv:
	ADDQ $4, DI
	DECQ R8
	JMP  sbrow

sbdone:
	VZEROUPPER
	RET


// LayerNorm rows (norm.go): the reference's operations per element in the same order, with the row sums
// formed in 16 lanes and then a fixed tree (HSUM19), so they differ from the scalar sums by FP32 rounding only.

// func layerNormStatsAVX512(x *float32, rows, cols int, mean, ss *float32)
//
// Per row: mean = (Σ x)/cols, ss = Σ (x − mean)².
TEXT ·layerNormStatsAVX512(SB), NOSPLIT, $0-40
	MOVQ      x+0(FP), SI
	MOVQ      rows+8(FP), R8
	MOVQ      mean+24(FP), DI
	MOVQ      ss+32(FP), R10
	MOVQ      cols+16(FP), R13
	VCVTSI2SSQ R13, X14, X14 // float32(cols)
	SHLQ      $2, R13

lsrow:
	TESTQ  R8, R8
	JLE    lsdone
	VPXORD Z19, Z19, Z19
	MOVQ   cols+16(FP), R11
	XORQ   R12, R12

lsp1:
	TESTQ     R11, R11
	JLE       lsp1end
	TAILMASK
	VMOVUPS.Z (SI)(R12*1), K1, Z0
	VADDPS    Z0, Z19, Z19
	ADDQ      $64, R12
	SUBQ      $16, R11
	JMP       lsp1

lsp1end:
	HSUM19
	VDIVSS       X14, X0, X0
	VMOVSS       X0, (DI)
	VBROADCASTSS X0, Z20
	VPXORD       Z19, Z19, Z19
	MOVQ         cols+16(FP), R11
	XORQ         R12, R12

lsp2:
	TESTQ       R11, R11
	JLE         lsp2end
	TAILMASK
	VMOVUPS.Z   (SI)(R12*1), K1, Z0
	VSUBPS      Z20, Z0, Z0
	VMULPS      Z0, Z0, Z0
	VMOVAPS.Z   Z0, K1, Z0
	VADDPS      Z0, Z19, Z19
	ADDQ        $64, R12
	SUBQ        $16, R11
	JMP         lsp2

lsp2end:
	HSUM19
	VMOVSS X0, (R10)
	ADDQ   R13, SI
	ADDQ   $4, DI
	ADDQ   $4, R10
	DECQ   R8
	JMP    lsrow

lsdone:
	VZEROUPPER
	RET

// func layerNormApplyAVX512(out, x *float32, rows, cols int, mean, rstd, gamma, beta *float32)
//
// out = (x − mean)·rstd·gamma + beta per row (out may be x).
TEXT ·layerNormApplyAVX512(SB), NOSPLIT, $0-64
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ rows+16(FP), R8
	MOVQ mean+32(FP), R10
	MOVQ rstd+40(FP), R14
	MOVQ gamma+48(FP), BX
	MOVQ beta+56(FP), DX
	MOVQ cols+24(FP), R13
	SHLQ $2, R13

larow:
	TESTQ        R8, R8
	JLE          ladone
	VBROADCASTSS (R10), Z20
	VBROADCASTSS (R14), Z21
	MOVQ         cols+24(FP), R11
	XORQ         R12, R12

lacol:
	TESTQ     R11, R11
	JLE       lanext
	TAILMASK
	VMOVUPS.Z (SI)(R12*1), K1, Z0
	VSUBPS    Z20, Z0, Z0
	VMULPS    Z21, Z0, Z0
	VMOVUPS.Z (BX)(R12*1), K1, Z1
	VMULPS    Z1, Z0, Z0
	VMOVUPS.Z (DX)(R12*1), K1, Z1
	VADDPS    Z1, Z0, Z0
	VMOVUPS   Z0, K1, (DI)(R12*1)
	ADDQ      $64, R12
	SUBQ      $16, R11
	JMP       lacol

lanext:
	ADDQ R13, SI
	ADDQ R13, DI
	ADDQ $4, R10
	ADDQ $4, R14
	DECQ R8
	JMP  larow

ladone:
	VZEROUPPER
	RET

// func layerNormBackAVX512(dx, dgamma, dbeta, dout, x, gamma, mean, rstd *float32, rows, cols int)
//
// layerNormBackwardKernel per row: g = dout·gamma, Σg and Σ g·(x − mean)·rstd in lanes, then dgamma +=
// dout·n̂ and dbeta += dout (each skipped when nil) and dx = rstd·(g − mean(g) − n̂·mean(g·n̂)). dx may be dout or x.
TEXT ·layerNormBackAVX512(SB), NOSPLIT, $0-80
	MOVQ      dx+0(FP), DI
	MOVQ      dout+24(FP), CX
	MOVQ      x+32(FP), SI
	MOVQ      gamma+40(FP), BX
	MOVQ      mean+48(FP), R10
	MOVQ      rstd+56(FP), R14
	MOVQ      rows+64(FP), R8
	MOVQ      cols+72(FP), R13
	VCVTSI2SSQ R13, X14, X14
	SHLQ      $2, R13

lbrow:
	TESTQ        R8, R8
	JLE          lbdone
	VBROADCASTSS (R10), Z20
	VBROADCASTSS (R14), Z21
	VPXORD       Z19, Z19, Z19
	VPXORD       Z18, Z18, Z18
	MOVQ         cols+72(FP), R11
	XORQ         R12, R12

lbp1:
	TESTQ     R11, R11
	JLE       lbp1end
	TAILMASK
	VMOVUPS.Z (CX)(R12*1), K1, Z0
	VMOVUPS.Z (BX)(R12*1), K1, Z1
	VMULPS    Z1, Z0, Z0 // g
	VADDPS    Z0, Z19, Z19
	VMOVUPS.Z (SI)(R12*1), K1, Z2
	VSUBPS    Z20, Z2, Z2
	VMULPS    Z2, Z0, Z0
	VMULPS    Z21, Z0, Z0
	VMOVAPS.Z Z0, K1, Z0
	VADDPS    Z0, Z18, Z18
	ADDQ      $64, R12
	SUBQ      $16, R11
	JMP       lbp1

lbp1end:
	HSUM19
	VDIVSS        X14, X0, X0
	VBROADCASTSS  X0, Z22 // mean(g)
	VMOVAPS       Z18, Z19
	HSUM19
	VDIVSS        X14, X0, X0
	VBROADCASTSS  X0, Z23 // mean(g·n̂)
	MOVQ          dgamma+8(FP), R9
	MOVQ          dbeta+16(FP), DX
	MOVQ          cols+72(FP), R11
	XORQ          R12, R12

lbp2:
	TESTQ     R11, R11
	JLE       lbnext
	MOVQ      R9, R15 // TAILMASK clobbers R9
	TAILMASK
	MOVQ      R15, R9
	VMOVUPS.Z (SI)(R12*1), K1, Z2
	VSUBPS    Z20, Z2, Z2
	VMULPS    Z21, Z2, Z2 // n̂
	VMOVUPS.Z (CX)(R12*1), K1, Z0 // dout
	TESTQ     R9, R9
	JZ        lbnog
	VMULPS    Z2, Z0, Z3
	VMOVUPS.Z (R9)(R12*1), K1, Z4
	VADDPS    Z3, Z4, Z4
	VMOVUPS   Z4, K1, (R9)(R12*1)

lbnog:
	TESTQ     DX, DX
	JZ        lbnob
	VMOVUPS.Z (DX)(R12*1), K1, Z4
	VADDPS    Z0, Z4, Z4
	VMOVUPS   Z4, K1, (DX)(R12*1)

lbnob:
	VMOVUPS.Z (BX)(R12*1), K1, Z1
	VMULPS    Z1, Z0, Z0
	VSUBPS    Z22, Z0, Z0
	VMULPS    Z23, Z2, Z2
	VSUBPS    Z2, Z0, Z0
	VMULPS    Z0, Z21, Z0
	VMOVUPS   Z0, K1, (DI)(R12*1)
	ADDQ      $64, R12
	SUBQ      $16, R11
	JMP       lbp2

lbnext:
	ADDQ R13, SI
	ADDQ R13, CX
	ADDQ R13, DI
	ADDQ $4, R10
	ADDQ $4, R14
	DECQ R8
	JMP  lbrow

lbdone:
	VZEROUPPER
	RET

// func adamWAVX512(w, grad, m, v *float32, n int, h *[8]float32, decay bool)
//
// adamWKernel for float32, 16 elements at a time, with the same operations in the same order (no FMA) and
// VSQRTPS, which equals float32(math.Sqrt(float64(x))) (a float64 square root of a float32 rounds to the
// correctly rounded float32 one), so the results are bit-identical. h = (df, b1, b2, 1−b1, 1−b2, step, bc2, eps)
// as float32, the values adamWKernel converts its float64 scalars to.
TEXT ·adamWAVX512(SB), NOSPLIT, $0-49
	MOVQ         w+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         m+16(FP), BX
	MOVQ         v+24(FP), DX
	MOVQ         n+32(FP), R11
	MOVQ         h+40(FP), AX
	VBROADCASTSS 0(AX), Z20  // df
	VBROADCASTSS 4(AX), Z21  // b1
	VBROADCASTSS 8(AX), Z22  // b2
	VBROADCASTSS 12(AX), Z23 // 1−b1
	VBROADCASTSS 16(AX), Z24 // 1−b2
	VBROADCASTSS 20(AX), Z25 // step
	VBROADCASTSS 24(AX), Z26 // bc2
	VBROADCASTSS 28(AX), Z27 // eps
	XORQ         R12, R12

adloop:
	TESTQ     R11, R11
	JLE       addone
	TAILMASK
	VMOVUPS.Z (DI)(R12*1), K1, Z0 // p
	CMPB      decay+48(FP), $0
	JEQ       adnodecay
	VMULPS    Z20, Z0, Z0

adnodecay:
	VMOVUPS.Z (SI)(R12*1), K1, Z1 // g
	VMOVUPS.Z (BX)(R12*1), K1, Z2 // m
	VMULPS    Z21, Z2, Z2
	VMULPS    Z1, Z23, Z3
	VADDPS    Z3, Z2, Z2          // m = b1·m + (1−b1)·g
	VMOVUPS   Z2, K1, (BX)(R12*1)
	VMOVUPS.Z (DX)(R12*1), K1, Z4 // v
	VMULPS    Z22, Z4, Z4
	VMULPS    Z1, Z24, Z5
	VMULPS    Z1, Z5, Z5
	VADDPS    Z5, Z4, Z4          // v = b2·v + (1−b2)·g·g
	VMOVUPS   Z4, K1, (DX)(R12*1)
	VSQRTPS   Z4, Z6
	VDIVPS    Z26, Z6, Z6
	VADDPS    Z27, Z6, Z6         // denom = √v/bc2 + eps
	VMULPS    Z2, Z25, Z7
	VDIVPS    Z6, Z7, Z7          // step·m/denom
	VSUBPS    Z7, Z0, Z0
	VMOVUPS   Z0, K1, (DI)(R12*1)
	ADDQ      $64, R12
	SUBQ      $16, R11
	JMP       adloop

addone:
	VZEROUPPER
	RET

// func addAVX512(out, a, b *float32, n int)
//
// out = a + b, 16 at a time (the same single rounding as addKernel; out may be a or b).
TEXT ·addAVX512(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), R11
	XORQ R12, R12

addloop:
	TESTQ     R11, R11
	JLE       adddone
	TAILMASK
	VMOVUPS.Z (SI)(R12*1), K1, Z0
	VMOVUPS.Z (DX)(R12*1), K1, Z1
	VADDPS    Z1, Z0, Z0
	VMOVUPS   Z0, K1, (DI)(R12*1)
	ADDQ      $64, R12
	SUBQ      $16, R11
	JMP       addloop

adddone:
	VZEROUPPER
	RET

// func axpyAVX512(y, x *float32, n int, alpha float32)
//
// y += alpha·x, 16 at a time with the product rounded before the add (no FMA), as axpyKernel.
TEXT ·axpyAVX512(SB), NOSPLIT, $0-28
	MOVQ         y+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), R11
	VBROADCASTSS alpha+24(FP), Z20
	XORQ         R12, R12

axloop:
	TESTQ     R11, R11
	JLE       axdone
	TAILMASK
	VMOVUPS.Z (SI)(R12*1), K1, Z0
	VMULPS    Z0, Z20, Z0
	VMOVUPS.Z (DI)(R12*1), K1, Z1
	VADDPS    Z0, Z1, Z1
	VMOVUPS   Z1, K1, (DI)(R12*1)
	ADDQ      $64, R12
	SUBQ      $16, R11
	JMP       axloop

axdone:
	VZEROUPPER
	RET
