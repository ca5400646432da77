//go:build !purego

#include "textflag.h"

// AVX2 element-wise pieces of the GDN chunk (see gdn_scan.go). Each lane does exactly the
// operations of the portable loop (no fused multiply-add), so vector and scalar elements agree.

// func gdnScaleCopy8(dst, src *float32, n int, s float32)
//
// dst[i] = s * src[i] for i < n, n a multiple of 8.
TEXT ·gdnScaleCopy8(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   scdone
	VBROADCASTSS s+24(FP), Y15
scloop:
	VMULPS (SI), Y15, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  scloop
scdone:
	VZEROUPPER
	RET

// func gdnRHS8(dst, v, ks *float32, n int, b, e float32)
//
// dst[i] = b * (v[i] - e*ks[i]) for i < n, n a multiple of 8.
TEXT ·gdnRHS8(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ ks+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   rhsdone
	VBROADCASTSS b+32(FP), Y14
	VBROADCASTSS e+36(FP), Y15
rhsloop:
	VMULPS (DX), Y15, Y0
	VMOVUPS (SI), Y1
	VSUBPS Y0, Y1, Y1
	VMULPS Y1, Y14, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  rhsloop
rhsdone:
	VZEROUPPER
	RET

// func gdnConv8(dst *float32, rows **float32, w *float32, k, ws, n int)
//
// dst[i] = sum over j < k of w[j*ws + i] * rows[j][i], from +0 in order j = 0, 1, ..., each
// product and each sum rounded (VMULPS, VADDPS; no fused multiply-add), for i < n, n a multiple
// of 8, k >= 1.
TEXT ·gdnConv8(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ rows+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ k+24(FP), R8
	MOVQ ws+32(FP), R9
	SHLQ $2, R9
	MOVQ n+40(FP), CX
	SHRQ $3, CX
	JZ   cvdone
	XORQ R10, R10
cvchunk:
	VXORPS Y0, Y0, Y0
	XORQ R11, R11
	LEAQ (DX)(R10*1), R12
cvtap:
	MOVQ (SI)(R11*8), R13
	VMOVUPS (R13)(R10*1), Y1
	VMULPS (R12), Y1, Y1
	VADDPS Y1, Y0, Y0
	ADDQ R9, R12
	INCQ R11
	CMPQ R11, R8
	JLT  cvtap
	VMOVUPS Y0, (DI)(R10*1)
	ADDQ $32, R10
	DECQ CX
	JNZ  cvchunk
cvdone:
	VZEROUPPER
	RET

// func axpy8(dst, src *float32, n int, w float32)
//
// dst[i] = dst[i] + w*src[i] for i < n, n a multiple of 8: the product and the sum each rounded
// (VMULPS, VADDPS; no fused multiply-add).
TEXT ·axpy8(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   axdone
	VBROADCASTSS w+24(FP), Y15
axloop:
	VMULPS (SI), Y15, Y0
	VADDPS (DI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  axloop
axdone:
	VZEROUPPER
	RET
