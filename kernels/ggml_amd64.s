//go:build !purego

#include "textflag.h"

// ggmlApply of ggml.go: runs of 16 signed byte codes, each widened to int32, converted to
// float32 (exact), multiplied by its run's scale and added to its run's offset: the portable
// loop's two roundings in the same order, so the same bits.

// func ggmlApplyAVX2(dst *float32, codes *byte, s, o *float32, runs int)
TEXT ·ggmlApplyAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ codes+8(FP), SI
	MOVQ s+16(FP), R8
	MOVQ o+24(FP), R9
	MOVQ runs+32(FP), CX
	TESTQ CX, CX
	JZ    gavx2done
gavx2run:
	VPMOVSXBD    (SI), Y0
	VPMOVSXBD    8(SI), Y1
	VCVTDQ2PS    Y0, Y0
	VCVTDQ2PS    Y1, Y1
	VBROADCASTSS (R8), Y2
	VBROADCASTSS (R9), Y3
	VMULPS       Y2, Y0, Y0
	VMULPS       Y2, Y1, Y1
	VADDPS       Y3, Y0, Y0
	VADDPS       Y3, Y1, Y1
	VMOVUPS      Y0, (DI)
	VMOVUPS      Y1, 32(DI)
	ADDQ         $16, SI
	ADDQ         $64, DI
	ADDQ         $4, R8
	ADDQ         $4, R9
	DECQ         CX
	JNZ          gavx2run
gavx2done:
	VZEROUPPER
	RET

// func ggmlApply512(dst *float32, codes *byte, s, o *float32, runs int)
TEXT ·ggmlApply512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ codes+8(FP), SI
	MOVQ s+16(FP), R8
	MOVQ o+24(FP), R9
	MOVQ runs+32(FP), CX
	TESTQ CX, CX
	JZ    g512done
g512run:
	VPMOVSXBD    (SI), Z0
	VCVTDQ2PS    Z0, Z0
	VBROADCASTSS (R8), Z2
	VBROADCASTSS (R9), Z3
	VMULPS       Z2, Z0, Z0
	VADDPS       Z3, Z0, Z0
	VMOVUPS      Z0, (DI)
	ADDQ         $16, SI
	ADDQ         $64, DI
	ADDQ         $4, R8
	ADDQ         $4, R9
	DECQ         CX
	JNZ          g512run
g512done:
	VZEROUPPER
	RET

// func nibbleTableAVX2(dst *byte, src *byte, stride int, kv *[16]int8, n int)
TEXT ·nibbleTableAVX2(SB), NOSPLIT, $0-40
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    stride+16(FP), DX
	MOVQ    kv+24(FP), R8
	MOVQ    n+32(FP), CX
	VMOVDQU (R8), X4
	MOVL    $0x0f0f0f0f, AX
	MOVD    AX, X5
	VPBROADCASTD X5, X5
	TESTQ   CX, CX
	JZ      ntdone
ntloop:
	VMOVDQU (SI), X0
	VPSRLW  $4, X0, X1
	VPAND   X5, X0, X0
	VPAND   X5, X1, X1
	VPSHUFB X0, X4, X0
	VPSHUFB X1, X4, X1
	VMOVDQU X0, (DI)
	VMOVDQU X1, 16(DI)
	ADDQ    DX, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     ntloop
ntdone:
	RET

// func nibble32AVX2(dst *byte, src *byte, n int)
TEXT ·nibble32AVX2(SB), NOSPLIT, $0-24
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    n+16(FP), CX
	MOVL    $0x0f0f0f0f, AX
	MOVD    AX, X5
	VPBROADCASTD X5, Y5
	TESTQ   CX, CX
	JZ      n32done
n32loop:
	VMOVDQU (SI), Y0
	VPSRLW  $4, Y0, Y1
	VPAND   Y5, Y0, Y0
	VPAND   Y5, Y1, Y1
	VMOVDQU Y0, (DI)
	VMOVDQU Y1, 32(DI)
	ADDQ    $32, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     n32loop
n32done:
	VZEROUPPER
	RET
