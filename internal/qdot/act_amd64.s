//go:build !purego

#include "textflag.h"

// AVX2 kernels of QuantizeInt8 (act.go quantBlock): the largest magnitude of a block, and its
// codes in octet order with their sum.

// octetIdx reorders 8 int32 lanes into octet order (elements 0 2 4 6 1 3 5 7); packIdx puts the
// dwords of the two lane-wise packs back in element order.
DATA octetIdx<>+0(SB)/4, $0
DATA octetIdx<>+4(SB)/4, $2
DATA octetIdx<>+8(SB)/4, $4
DATA octetIdx<>+12(SB)/4, $6
DATA octetIdx<>+16(SB)/4, $1
DATA octetIdx<>+20(SB)/4, $3
DATA octetIdx<>+24(SB)/4, $5
DATA octetIdx<>+28(SB)/4, $7
GLOBL octetIdx<>(SB), RODATA|NOPTR, $32

DATA packIdx<>+0(SB)/4, $0
DATA packIdx<>+4(SB)/4, $4
DATA packIdx<>+8(SB)/4, $1
DATA packIdx<>+12(SB)/4, $5
DATA packIdx<>+16(SB)/4, $2
DATA packIdx<>+20(SB)/4, $6
DATA packIdx<>+24(SB)/4, $3
DATA packIdx<>+28(SB)/4, $7
GLOBL packIdx<>(SB), RODATA|NOPTR, $32

DATA absMask<>+0(SB)/4, $0x7fffffff
GLOBL absMask<>(SB), RODATA|NOPTR, $4

// func amaxBitsAVX2(x *float32, n int) uint32: the largest of the bits of |x[i]| (n a
// multiple of 32, n > 0). Non-negative floats order as their bit patterns.
TEXT ·amaxBitsAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VPBROADCASTD absMask<>(SB), Y15
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
amaxLoop:
	VPAND 0(SI), Y15, Y4
	VPAND 32(SI), Y15, Y5
	VPAND 64(SI), Y15, Y6
	VPAND 96(SI), Y15, Y7
	VPMAXUD Y4, Y0, Y0
	VPMAXUD Y5, Y1, Y1
	VPMAXUD Y6, Y2, Y2
	VPMAXUD Y7, Y3, Y3
	ADDQ $128, SI
	SUBQ $32, CX
	JNZ amaxLoop
	VPMAXUD Y1, Y0, Y0
	VPMAXUD Y3, Y2, Y2
	VPMAXUD Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPMAXUD X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPMAXUD X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPMAXUD X1, X0, X0
	VMOVD X0, AX
	MOVL AX, ret+16(FP)
	VZEROUPPER
	RET

// CODES8 converts the 8 floats at off(SI) to int32 codes RNE(x * inv) (float64 product, the
// default rounding mode: nearest even) in Yd, adds them to Y14 and puts them in octet order.
#define CODES8(off, Yd, Xd) \
	VCVTPS2PD off(SI), Y4 \
	VCVTPS2PD off+16(SI), Y5 \
	VMULPD Y15, Y4, Y4 \
	VMULPD Y15, Y5, Y5 \
	VCVTPD2DQY Y4, Xd \
	VCVTPD2DQY Y5, X6 \
	VINSERTI128 $1, X6, Yd, Yd \
	VPADDD Yd, Y14, Y14 \
	VPERMD Yd, Y13, Yd

// func codesAVX2(q *int8, x *float32, n int, inv float64) int32: q[i] = RNE(x[i] * inv) in
// octet order (n a multiple of 32, n > 0, |x * inv| <= 127), returning the sum of the codes.
TEXT ·codesAVX2(SB), NOSPLIT, $0-36
	MOVQ q+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSD inv+24(FP), Y15
	VMOVDQU octetIdx<>(SB), Y13
	VMOVDQU packIdx<>(SB), Y12
	VPXOR Y14, Y14, Y14
codesLoop:
	CODES8(0, Y0, X0)
	CODES8(32, Y1, X1)
	CODES8(64, Y2, X2)
	CODES8(96, Y3, X3)
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD Y0, Y12, Y0
	VMOVDQU Y0, 0(DI)
	ADDQ $128, SI
	ADDQ $32, DI
	SUBQ $32, CX
	JNZ codesLoop
	VEXTRACTI128 $1, Y14, X1
	VPADDD X1, X14, X0
	VPSHUFD $0x4e, X0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPADDD X1, X0, X0
	VMOVD X0, AX
	MOVL AX, ret+32(FP)
	VZEROUPPER
	RET

// The constants of roundBF16AVX2, in the order of Y1-Y5.
DATA rbConst<>+0(SB)/4, $0x7fff
DATA rbConst<>+4(SB)/4, $1
DATA rbConst<>+8(SB)/4, $0x7f80
DATA rbConst<>+12(SB)/4, $0x8000
DATA rbConst<>+16(SB)/4, $0x40
GLOBL rbConst<>(SB), RODATA|NOPTR, $20

// func roundBF16AVX2(dst *uint16, src *float32, n int)
//
// dst[i] = ToBF16(src[i]) for i < n, n a multiple of 16 (RoundBF16 where the CPU has AVX2),
// bitwise the portable ToBF16: h = (b + 0x7fff + (b>>16 & 1)) >> 16 on the bits b; a result whose
// exponent is 0 keeps its sign alone; a NaN is b>>16 | 0x40. Y1-Y5 hold rbConst's 0x7fff, 1,
// 0x7f80, 0x8000, 0x40 in every lane, Y15 zero.
TEXT ·roundBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VPBROADCASTD rbConst<>+0(SB), Y1
	VPBROADCASTD rbConst<>+4(SB), Y2
	VPBROADCASTD rbConst<>+8(SB), Y3
	VPBROADCASTD rbConst<>+12(SB), Y4
	VPBROADCASTD rbConst<>+16(SB), Y5
	VPXOR Y15, Y15, Y15
	TESTQ CX, CX
	JZ rbdone
rbloop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y8
	// first 8
	VPSRLD $16, Y0, Y6           // b >> 16
	VPAND Y2, Y6, Y7
	VPADDD Y1, Y0, Y9
	VPADDD Y7, Y9, Y9
	VPSRLD $16, Y9, Y9           // h
	VPAND Y3, Y9, Y10
	VPCMPEQD Y15, Y10, Y10       // exponent 0
	VPAND Y4, Y9, Y11
	VPBLENDVB Y10, Y11, Y9, Y9   // sign alone there
	VCMPPS $3, Y0, Y0, Y10       // NaN
	VPOR Y5, Y6, Y11
	VPBLENDVB Y10, Y11, Y9, Y12
	// second 8
	VPSRLD $16, Y8, Y6
	VPAND Y2, Y6, Y7
	VPADDD Y1, Y8, Y9
	VPADDD Y7, Y9, Y9
	VPSRLD $16, Y9, Y9
	VPAND Y3, Y9, Y10
	VPCMPEQD Y15, Y10, Y10
	VPAND Y4, Y9, Y11
	VPBLENDVB Y10, Y11, Y9, Y9
	VCMPPS $3, Y8, Y8, Y10
	VPOR Y5, Y6, Y11
	VPBLENDVB Y10, Y11, Y9, Y13
	// 16 words in order: the packing interleaves 128-bit halves, VPERMQ restores the order
	VPACKUSDW Y13, Y12, Y14
	VPERMQ $0xD8, Y14, Y14
	VMOVDQU Y14, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	SUBQ $16, CX
	JNZ rbloop
rbdone:
	VZEROUPPER
	RET
