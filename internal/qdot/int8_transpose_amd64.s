//go:build !purego

#include "textflag.h"

// func i8Transpose(dst *uint32, src *uint32, stride int, jblocks int, shuf *[32]byte, xor uint32)
//
// The bulk of a full panel's packing (int8_pack.go, transposePanel): dst[j*32 + c] =
// f(src[c*stride + j]) for the 32 columns c and the words j < 8*jblocks, with f a byte shuffle
// within each pair of words (shuf, VPSHUFB: the octet order of 8-bit codes, or the identity)
// followed by an XOR with xor. Each group of 8 columns is transposed 8 x 8 words at a time in
// AVX2 registers: Y0-Y7 the loaded words of the 8 columns, Y8-Y13 and Y0-Y3 the unpacked
// halves, Y14 the shuffle, Y15 the XOR.
TEXT ·i8Transpose(SB), NOSPLIT, $0-44
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), DX
	SHLQ $2, DX                 // bytes between columns
	LEAQ (DX)(DX*2), BX         // 3 columns
	MOVQ jblocks+24(FP), CX
	MOVQ shuf+32(FP), AX
	VMOVDQU (AX), Y14
	MOVL xor+40(FP), AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVQ $4, R8                 // groups of 8 columns

group:
	MOVQ SI, R9                 // columns 0-3 of the group
	LEAQ (SI)(DX*4), R12        // columns 4-7
	MOVQ DI, R10
	MOVQ CX, R11

block:
	VMOVDQU (R9), Y0
	VMOVDQU (R9)(DX*1), Y1
	VMOVDQU (R9)(DX*2), Y2
	VMOVDQU (R9)(BX*1), Y3
	VMOVDQU (R12), Y4
	VMOVDQU (R12)(DX*1), Y5
	VMOVDQU (R12)(DX*2), Y6
	VMOVDQU (R12)(BX*1), Y7
	VPSHUFB Y14, Y0, Y0
	VPSHUFB Y14, Y1, Y1
	VPSHUFB Y14, Y2, Y2
	VPSHUFB Y14, Y3, Y3
	VPSHUFB Y14, Y4, Y4
	VPSHUFB Y14, Y5, Y5
	VPSHUFB Y14, Y6, Y6
	VPSHUFB Y14, Y7, Y7
	VPXOR Y15, Y0, Y0
	VPXOR Y15, Y1, Y1
	VPXOR Y15, Y2, Y2
	VPXOR Y15, Y3, Y3
	VPXOR Y15, Y4, Y4
	VPXOR Y15, Y5, Y5
	VPXOR Y15, Y6, Y6
	VPXOR Y15, Y7, Y7
	// Column c word j is a_cj. Pairs of columns interleaved by words:
	VPUNPCKLDQ Y1, Y0, Y8       // a00 a10 a01 a11 | a04 a14 a05 a15
	VPUNPCKHDQ Y1, Y0, Y9       // a02 a12 a03 a13 | a06 a16 a07 a17
	VPUNPCKLDQ Y3, Y2, Y10
	VPUNPCKHDQ Y3, Y2, Y11
	VPUNPCKLDQ Y5, Y4, Y12
	VPUNPCKHDQ Y5, Y4, Y13
	VPUNPCKLDQ Y7, Y6, Y0
	VPUNPCKHDQ Y7, Y6, Y1
	// then quadruples of columns by pairs of words:
	VPUNPCKLQDQ Y10, Y8, Y2     // a00 a10 a20 a30 | a04 a14 a24 a34
	VPUNPCKHQDQ Y10, Y8, Y3     // a01 .. a31 | a05 .. a35
	VPUNPCKLQDQ Y11, Y9, Y4     // a02 .. | a06 ..
	VPUNPCKHQDQ Y11, Y9, Y5     // a03 .. | a07 ..
	VPUNPCKLQDQ Y0, Y12, Y6     // a40 .. a70 | a44 .. a74
	VPUNPCKHQDQ Y0, Y12, Y7
	VPUNPCKLQDQ Y1, Y13, Y8
	VPUNPCKHQDQ Y1, Y13, Y9
	// and the 128-bit halves: word j of the 8 columns.
	VPERM2I128 $0x20, Y6, Y2, Y10 // word 0
	VPERM2I128 $0x31, Y6, Y2, Y11 // word 4
	VPERM2I128 $0x20, Y7, Y3, Y12 // word 1
	VPERM2I128 $0x31, Y7, Y3, Y13 // word 5
	VPERM2I128 $0x20, Y8, Y4, Y0  // word 2
	VPERM2I128 $0x31, Y8, Y4, Y1  // word 6
	VPERM2I128 $0x20, Y9, Y5, Y2  // word 3
	VPERM2I128 $0x31, Y9, Y5, Y3  // word 7
	VMOVDQU Y10, 0(R10)
	VMOVDQU Y12, 128(R10)
	VMOVDQU Y0, 256(R10)
	VMOVDQU Y2, 384(R10)
	VMOVDQU Y11, 512(R10)
	VMOVDQU Y13, 640(R10)
	VMOVDQU Y1, 768(R10)
	VMOVDQU Y3, 896(R10)
	ADDQ $32, R9
	ADDQ $32, R12
	ADDQ $1024, R10
	DECQ R11
	JNZ block

	LEAQ (SI)(DX*8), SI
	ADDQ $32, DI
	DECQ R8
	JNZ group
	VZEROUPPER
	RET
