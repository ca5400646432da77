//go:build !purego

#include "textflag.h"

// Dequantization chunk kernels of quant.go: groups runs of chunks 32-element chunks; chunk c of
// a group reads its bits code words (loaded under the table's lane mask, so no word past the
// chunk is touched), extracts element i as (word[lo[i]] >> shr[i] | word[hi[i]] << shl[i]) &
// mask through lane permutes and variable shifts, converts it to float32 and writes
// fma(q, scale, bias) with the group's scale and bias from sb (float32 pairs). One rounding per
// element, as the portable kernel: the three kernel sets give bitwise the same values.

// Offsets of the qTable fields (quant.go): lo at 0, hi at 128, shr at 256, shl at 384, the
// load mask at 512, the value mask at 576. The blocks take the byte offsets of their lanes in
// each of the four lane tables.

// One block of 8 elements (AVX2): lanes off..off+7 of the chunk into OUT bytes of DI.
#define AVX2_BLOCK(lo, hi, shr, shl, out) \
	VMOVDQU lo(R11), Y12 \
	VPERMD  Y8, Y12, Y12 \
	VMOVDQU hi(R11), Y13 \
	VPERMD  Y8, Y13, Y13 \
	VPSRLVD shr(R11), Y12, Y12 \
	VPSLLVD shl(R11), Y13, Y13 \
	VPOR    Y13, Y12, Y12 \
	VPAND   Y9, Y12, Y12 \
	VCVTDQ2PS Y12, Y12 \
	VFMADD213PS Y11, Y10, Y12 \
	VMOVUPS Y12, out(DI)

// func qDequantAVX2(dst *float32, codes *uint32, sb *float32, groups, chunks, bits int, tbl *qTable)
TEXT ·qDequantAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ codes+8(FP), SI
	MOVQ sb+16(FP), DX
	MOVQ groups+24(FP), R8
	MOVQ bits+40(FP), R10
	SHLQ $2, R10                    // bytes of code words per chunk
	MOVQ tbl+48(FP), R11
	VMOVDQU 512(R11), Y14
	VPBROADCASTD 576(R11), Y9
	TESTQ R8, R8
	JZ   avx2done
avx2group:
	VBROADCASTSS (DX), Y10
	VBROADCASTSS 4(DX), Y11
	MOVQ chunks+32(FP), R9
avx2chunk:
	VPMASKMOVD (SI), Y14, Y8
	AVX2_BLOCK(0, 128, 256, 384, 0)
	AVX2_BLOCK(32, 160, 288, 416, 32)
	AVX2_BLOCK(64, 192, 320, 448, 64)
	AVX2_BLOCK(96, 224, 352, 480, 96)
	ADDQ R10, SI
	ADDQ $128, DI
	DECQ R9
	JNZ  avx2chunk
	ADDQ $8, DX
	DECQ R8
	JNZ  avx2group
avx2done:
	VZEROUPPER
	RET

// One block of 16 elements (AVX-512F): lanes off..off+15 of the chunk into OUT bytes of DI.
#define AVX512_BLOCK(lo, hi, shr, shl, out) \
	VMOVDQU32 lo(R11), Z12 \
	VPERMD    Z8, Z12, Z12 \
	VMOVDQU32 hi(R11), Z13 \
	VPERMD    Z8, Z13, Z13 \
	VPSRLVD   shr(R11), Z12, Z12 \
	VPSLLVD   shl(R11), Z13, Z13 \
	VPORD     Z13, Z12, Z12 \
	VPANDD    Z9, Z12, Z12 \
	VCVTDQ2PS Z12, Z12 \
	VFMADD213PS Z11, Z10, Z12 \
	VMOVUPS   Z12, out(DI)

// func qDequant512(dst *float32, codes *uint32, sb *float32, groups, chunks, bits int, tbl *qTable)
TEXT ·qDequant512(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ codes+8(FP), SI
	MOVQ sb+16(FP), DX
	MOVQ groups+24(FP), R8
	MOVQ bits+40(FP), R10
	MOVQ $1, AX
	MOVQ R10, CX
	SHLQ CX, AX
	DECQ AX
	KMOVW AX, K1                    // the chunk's bits words
	SHLQ $2, R10                    // bytes of code words per chunk
	MOVQ tbl+48(FP), R11
	VPBROADCASTD 576(R11), Z9
	TESTQ R8, R8
	JZ   z512done
z512group:
	VBROADCASTSS (DX), Z10
	VBROADCASTSS 4(DX), Z11
	MOVQ chunks+32(FP), R9
z512chunk:
	VMOVDQU32.Z (SI), K1, Z8
	AVX512_BLOCK(0, 128, 256, 384, 0)
	AVX512_BLOCK(64, 192, 320, 448, 64)
	ADDQ R10, SI
	ADDQ $128, DI
	DECQ R9
	JNZ  z512chunk
	ADDQ $8, DX
	DECQ R8
	JNZ  z512group
z512done:
	VZEROUPPER
	RET
