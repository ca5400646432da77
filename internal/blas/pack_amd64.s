//go:build !purego

#include "textflag.h"

// func transpose8(dst *float32, ldd int, src *float32, lds int, k int)
//
// dst[j*ldd + i] = src[i*lds + j] for the eight rows i < 8 of src and j < k, k a multiple of 8;
// ldd and lds are element strides. Eight columns at a time: one 8x8 block of src in eight YMM
// registers, transposed by unpack, shuffle and 128-bit-lane permutes, stored as eight rows of
// dst. AVX only.
TEXT ·transpose8(SB), NOSPLIT, $0-40
	MOVQ k+32(FP), CX
	SHRQ $3, CX
	JZ   done
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	SHLQ $2, R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	SHLQ $2, R9
	LEAQ (SI)(R9*4), R10          // src row 4
	LEAQ (R9)(R9*2), R11          // 3*lds bytes
	LEAQ (R8)(R8*2), R12          // 3*ldd bytes

loop:
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(R9*1), Y1
	VMOVUPS (SI)(R9*2), Y2
	VMOVUPS (SI)(R11*1), Y3
	VMOVUPS (R10), Y4
	VMOVUPS (R10)(R9*1), Y5
	VMOVUPS (R10)(R9*2), Y6
	VMOVUPS (R10)(R11*1), Y7
	// rows 0..3: Y0..Y3 = columns (0|4), (1|5), (2|6), (3|7) of rows 0..3 per 128-bit lane
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	// rows 4..7 likewise into Y4..Y7
	VUNPCKLPS Y5, Y4, Y8
	VUNPCKHPS Y5, Y4, Y9
	VUNPCKLPS Y7, Y6, Y10
	VUNPCKHPS Y7, Y6, Y11
	VSHUFPS $0x44, Y10, Y8, Y4
	VSHUFPS $0xEE, Y10, Y8, Y5
	VSHUFPS $0x44, Y11, Y9, Y6
	VSHUFPS $0xEE, Y11, Y9, Y7
	// column c of the block: low lanes give c < 4, high lanes c + 4
	LEAQ (DI)(R8*4), DX           // dst row 4 of this block
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x31, Y4, Y0, Y9
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, (DX)
	VPERM2F128 $0x20, Y5, Y1, Y10
	VPERM2F128 $0x31, Y5, Y1, Y11
	VMOVUPS Y10, (DI)(R8*1)
	VMOVUPS Y11, (DX)(R8*1)
	VPERM2F128 $0x20, Y6, Y2, Y12
	VPERM2F128 $0x31, Y6, Y2, Y13
	VMOVUPS Y12, (DI)(R8*2)
	VMOVUPS Y13, (DX)(R8*2)
	VPERM2F128 $0x20, Y7, Y3, Y8
	VPERM2F128 $0x31, Y7, Y3, Y9
	VMOVUPS Y8, (DI)(R12*1)
	VMOVUPS Y9, (DX)(R12*1)
	ADDQ $32, SI
	ADDQ $32, R10
	LEAQ (DI)(R8*8), DI
	DECQ CX
	JNZ  loop

done:
	VZEROUPPER
	RET

// func addTo8(dst, src *float32, n int)
//
// dst[i] += src[i] for i < n, n a multiple of 8: the IEEE single-precision additions of the Go
// loop, eight lanes at a time. AVX only.
TEXT ·addTo8(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   adone

aloop:
	VMOVUPS (DI), Y0
	VADDPS (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	DECQ CX
	JNZ  aloop

adone:
	VZEROUPPER
	RET
