//go:build !purego

#include "textflag.h"

// func widenBF16x16(dst *float32, src *uint16, n int)
//
// dst[i] = float32 with bits src[i] << 16, for i < n, n a multiple of 16: zero-extend 8
// halves to 32-bit lanes, shift them into the high half.
TEXT ·widenBF16x16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   done

loop:
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VMOVDQU   Y0, (DI)
	VMOVDQU   Y1, 32(DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       loop
	VZEROUPPER

done:
	RET
