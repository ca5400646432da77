//go:build !purego

#include "textflag.h"

// Float-format decoding kernels of fpquant.go: groups runs of glen codes (glen a multiple of
// 16), each written as decode(code) * scale with the group's float32 scale, one multiply.
// E4M3: mag = code & 0x7f; a normal code (mag > 7) is the float32 bits mag << 20 plus 120 << 23
// (the exponent rebased from bias 7 to 127), a subnormal one float(mag & 7) * 2^-9 (exact), mag
// 0x7f the quiet NaN; the sign is bit 7 moved to bit 31. E2M1: the nibble's low 3 bits index the
// eight magnitudes, bit 3 is the sign (the AVX-512F form looks all 16 signed values up at once).
// The AVX2 and AVX-512F forms and the portable loops give bitwise the same values.

// fpq<>: 0 nibble shifts of one word (8 dwords), 32 the same twice (16 dwords), 96 the 16 E2M1
// values, 160 the lane -> word index of two words (16 dwords), 224 the scalars 0x7f, 0x80,
// 120 << 23, 7, 2^-9, NaN, 0xf, 8.
DATA fpq<>+0(SB)/4, $0
DATA fpq<>+4(SB)/4, $4
DATA fpq<>+8(SB)/4, $8
DATA fpq<>+12(SB)/4, $12
DATA fpq<>+16(SB)/4, $16
DATA fpq<>+20(SB)/4, $20
DATA fpq<>+24(SB)/4, $24
DATA fpq<>+28(SB)/4, $28
DATA fpq<>+32(SB)/4, $0
DATA fpq<>+36(SB)/4, $4
DATA fpq<>+40(SB)/4, $8
DATA fpq<>+44(SB)/4, $12
DATA fpq<>+48(SB)/4, $16
DATA fpq<>+52(SB)/4, $20
DATA fpq<>+56(SB)/4, $24
DATA fpq<>+60(SB)/4, $28
DATA fpq<>+64(SB)/4, $0
DATA fpq<>+68(SB)/4, $4
DATA fpq<>+72(SB)/4, $8
DATA fpq<>+76(SB)/4, $12
DATA fpq<>+80(SB)/4, $16
DATA fpq<>+84(SB)/4, $20
DATA fpq<>+88(SB)/4, $24
DATA fpq<>+92(SB)/4, $28
DATA fpq<>+96(SB)/4, $0x00000000  // 0
DATA fpq<>+100(SB)/4, $0x3f000000 // 0.5
DATA fpq<>+104(SB)/4, $0x3f800000 // 1
DATA fpq<>+108(SB)/4, $0x3fc00000 // 1.5
DATA fpq<>+112(SB)/4, $0x40000000 // 2
DATA fpq<>+116(SB)/4, $0x40400000 // 3
DATA fpq<>+120(SB)/4, $0x40800000 // 4
DATA fpq<>+124(SB)/4, $0x40c00000 // 6
DATA fpq<>+128(SB)/4, $0x80000000 // -0
DATA fpq<>+132(SB)/4, $0xbf000000
DATA fpq<>+136(SB)/4, $0xbf800000
DATA fpq<>+140(SB)/4, $0xbfc00000
DATA fpq<>+144(SB)/4, $0xc0000000
DATA fpq<>+148(SB)/4, $0xc0400000
DATA fpq<>+152(SB)/4, $0xc0800000
DATA fpq<>+156(SB)/4, $0xc0c00000
DATA fpq<>+160(SB)/8, $0
DATA fpq<>+168(SB)/8, $0
DATA fpq<>+176(SB)/8, $0
DATA fpq<>+184(SB)/8, $0
DATA fpq<>+192(SB)/8, $0x0000000100000001
DATA fpq<>+200(SB)/8, $0x0000000100000001
DATA fpq<>+208(SB)/8, $0x0000000100000001
DATA fpq<>+216(SB)/8, $0x0000000100000001
DATA fpq<>+224(SB)/4, $0x7f
DATA fpq<>+228(SB)/4, $0x80
DATA fpq<>+232(SB)/4, $0x3c000000 // 120 << 23
DATA fpq<>+236(SB)/4, $7
DATA fpq<>+240(SB)/4, $0x3b000000 // 2^-9
DATA fpq<>+244(SB)/4, $0x7fc00000 // NaN
DATA fpq<>+248(SB)/4, $0xf
DATA fpq<>+252(SB)/4, $8
GLOBL fpq<>(SB), RODATA|NOPTR, $256

// 8 E4M3 codes at off(SI) into 8 float32 at out(DI) (AVX2): Y8 0x7f, Y9 120 << 23, Y10 7,
// Y11 2^-9, Y12 NaN, Y13 the scale, Y14 0x80.
#define E4M3_AVX2(off, out) \
	VPMOVZXBD off(SI), Y0 \
	VPAND     Y8, Y0, Y1 \
	VPAND     Y14, Y0, Y0 \
	VPSLLD    $24, Y0, Y0 \
	VPSLLD    $20, Y1, Y2 \
	VPADDD    Y9, Y2, Y2 \
	VPAND     Y10, Y1, Y3 \
	VCVTDQ2PS Y3, Y3 \
	VMULPS    Y11, Y3, Y3 \
	VPCMPGTD  Y10, Y1, Y4 \
	VBLENDVPS Y4, Y2, Y3, Y3 \
	VPCMPEQD  Y8, Y1, Y4 \
	VBLENDVPS Y4, Y12, Y3, Y3 \
	VPOR      Y0, Y3, Y3 \
	VMULPS    Y13, Y3, Y3 \
	VMOVUPS   Y3, out(DI)

// func e4m3DecodeAVX2(dst *float32, codes *uint8, scales *float32, groups, glen int)
TEXT ·e4m3DecodeAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ codes+8(FP), SI
	MOVQ scales+16(FP), DX
	MOVQ groups+24(FP), R8
	VPBROADCASTD fpq<>+224(SB), Y8
	VPBROADCASTD fpq<>+232(SB), Y9
	VPBROADCASTD fpq<>+236(SB), Y10
	VPBROADCASTD fpq<>+240(SB), Y11
	VPBROADCASTD fpq<>+244(SB), Y12
	VPBROADCASTD fpq<>+228(SB), Y14
	TESTQ R8, R8
	JZ    e4avx2done
e4avx2group:
	VBROADCASTSS (DX), Y13
	MOVQ glen+32(FP), R9
	SHRQ $4, R9
e4avx2run:
	E4M3_AVX2(0, 0)
	E4M3_AVX2(8, 32)
	ADDQ $16, SI
	ADDQ $64, DI
	DECQ R9
	JNZ  e4avx2run
	ADDQ $4, DX
	DECQ R8
	JNZ  e4avx2group
e4avx2done:
	VZEROUPPER
	RET

// 16 E4M3 codes at off(SI) into 16 float32 at out(DI) (AVX-512F), registers as E4M3_AVX2's.
#define E4M3_512(off, out) \
	VPMOVZXBD off(SI), Z0 \
	VPANDD    Z8, Z0, Z1 \
	VPANDD    Z14, Z0, Z0 \
	VPSLLD    $24, Z0, Z0 \
	VPSLLD    $20, Z1, Z2 \
	VPADDD    Z9, Z2, Z2 \
	VPANDD    Z10, Z1, Z3 \
	VCVTDQ2PS Z3, Z3 \
	VMULPS    Z11, Z3, Z3 \
	VPCMPGTD  Z10, Z1, K1 \
	VMOVAPS   Z2, K1, Z3 \
	VPCMPEQD  Z8, Z1, K2 \
	VMOVAPS   Z12, K2, Z3 \
	VPORD     Z0, Z3, Z3 \
	VMULPS    Z13, Z3, Z3 \
	VMOVUPS   Z3, out(DI)

// func e4m3Decode512(dst *float32, codes *uint8, scales *float32, groups, glen int)
TEXT ·e4m3Decode512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ codes+8(FP), SI
	MOVQ scales+16(FP), DX
	MOVQ groups+24(FP), R8
	VPBROADCASTD fpq<>+224(SB), Z8
	VPBROADCASTD fpq<>+232(SB), Z9
	VPBROADCASTD fpq<>+236(SB), Z10
	VPBROADCASTD fpq<>+240(SB), Z11
	VPBROADCASTD fpq<>+244(SB), Z12
	VPBROADCASTD fpq<>+228(SB), Z14
	TESTQ R8, R8
	JZ    e4z512done
e4z512group:
	VBROADCASTSS (DX), Z13
	MOVQ glen+32(FP), R9
	SHRQ $4, R9
e4z512run:
	E4M3_512(0, 0)
	ADDQ $16, SI
	ADDQ $64, DI
	DECQ R9
	JNZ  e4z512run
	ADDQ $4, DX
	DECQ R8
	JNZ  e4z512group
e4z512done:
	VZEROUPPER
	RET

// 8 E2M1 codes of the word at off(SI) into 8 float32 at out(DI) (AVX2): Y5 the nibble shifts,
// Y6 0xf, Y7 the 8 magnitudes, Y13 the scale, Y14 8.
#define E2M1_AVX2(off, out) \
	VPBROADCASTD off(SI), Y0 \
	VPSRLVD      Y5, Y0, Y0 \
	VPAND        Y6, Y0, Y0 \
	VPERMPS      Y7, Y0, Y1 \
	VPAND        Y14, Y0, Y0 \
	VPSLLD       $28, Y0, Y0 \
	VPOR         Y0, Y1, Y1 \
	VMULPS       Y13, Y1, Y1 \
	VMOVUPS      Y1, out(DI)

// func e2m1DecodeAVX2(dst *float32, codes *uint32, scales *float32, groups, glen int)
TEXT ·e2m1DecodeAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ codes+8(FP), SI
	MOVQ scales+16(FP), DX
	MOVQ groups+24(FP), R8
	VMOVDQU      fpq<>+0(SB), Y5
	VPBROADCASTD fpq<>+248(SB), Y6
	VMOVUPS      fpq<>+96(SB), Y7
	VPBROADCASTD fpq<>+252(SB), Y14
	TESTQ R8, R8
	JZ    e2avx2done
e2avx2group:
	VBROADCASTSS (DX), Y13
	MOVQ glen+32(FP), R9
	SHRQ $4, R9
e2avx2run:
	E2M1_AVX2(0, 0)
	E2M1_AVX2(4, 32)
	ADDQ $8, SI
	ADDQ $64, DI
	DECQ R9
	JNZ  e2avx2run
	ADDQ $4, DX
	DECQ R8
	JNZ  e2avx2group
e2avx2done:
	VZEROUPPER
	RET

// func e2m1Decode512(dst *float32, codes *uint32, scales *float32, groups, glen int)
//
// 16 codes of two words per step: both words broadcast, lanes 0..7 take the first and 8..15
// the second (Z15), shifted by their nibble (Z5), masked (Z6) and looked up signed (Z7).
TEXT ·e2m1Decode512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ codes+8(FP), SI
	MOVQ scales+16(FP), DX
	MOVQ groups+24(FP), R8
	VMOVDQU32    fpq<>+32(SB), Z5
	VPBROADCASTD fpq<>+248(SB), Z6
	VMOVUPS      fpq<>+96(SB), Z7
	VMOVDQU32    fpq<>+160(SB), Z15
	TESTQ R8, R8
	JZ    e2z512done
e2z512group:
	VBROADCASTSS (DX), Z13
	MOVQ glen+32(FP), R9
	SHRQ $4, R9
e2z512run:
	VPBROADCASTQ (SI), Z0
	VPERMD       Z0, Z15, Z0
	VPSRLVD      Z5, Z0, Z0
	VPANDD       Z6, Z0, Z0
	VPERMPS      Z7, Z0, Z1
	VMULPS       Z13, Z1, Z1
	VMOVUPS      Z1, (DI)
	ADDQ $8, SI
	ADDQ $64, DI
	DECQ R9
	JNZ  e2z512run
	ADDQ $4, DX
	DECQ R8
	JNZ  e2z512group
e2z512done:
	VZEROUPPER
	RET
