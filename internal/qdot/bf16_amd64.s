//go:build !purego

#include "textflag.h"
#include "bf16_amd64.h"

// The VDPBF16PS kernel (bf16_pack_amd64.go describes the panel and the argument block): a tile of 6
// activation rows times a panel of 32 weight columns over all of K. Register use: Z0-Z11 the
// current K block's float32 sums (row r, columns 16v..16v+15 in Z(2r+v)), Z12-Z23 the results
// (Z(12+2r+v)), Z24-Z25 the weight pairs, Z28 the broadcast activation pair, Z26-Z27 the
// block scales. After each K block: y = s (first block) or y = y + s, or with scales y = s *
// scale, then y = y + s * scale, multiply and add rounded apart.

// func b16AVX512(a *b16args)
TEXT ·b16AVX512(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), DI
	MOVQ 0(DI), SI               // panel pairs
	MOVQ 8(DI), R8               // activation row 0
	MOVQ 16(DI), R10             // ldx
	LEAQ (R8)(R10*2), R9
	ADDQ R10, R9                 // row 3
	MOVQ 24(DI), R11             // block scales
	MOVQ 48(DI), BX              // pairs left
	XORQ DX, DX                  // 0 before the first block
b16block:
	MOVQ 40(DI), CX
	CMPQ BX, CX
	CMOVQLT BX, CX               // pairs in this block
	SUBQ CX, BX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
b16pair:
	VMOVDQU32 (SI), Z24
	VMOVDQU32 64(SI), Z25
	VPBROADCASTD (R8), Z28
	VDPBF16PS_Z(0, 24, 28)
	VDPBF16PS_Z(1, 25, 28)
	VPBROADCASTD (R8)(R10*1), Z28
	VDPBF16PS_Z(2, 24, 28)
	VDPBF16PS_Z(3, 25, 28)
	VPBROADCASTD (R8)(R10*2), Z28
	VDPBF16PS_Z(4, 24, 28)
	VDPBF16PS_Z(5, 25, 28)
	VPBROADCASTD (R9), Z28
	VDPBF16PS_Z(6, 24, 28)
	VDPBF16PS_Z(7, 25, 28)
	VPBROADCASTD (R9)(R10*1), Z28
	VDPBF16PS_Z(8, 24, 28)
	VDPBF16PS_Z(9, 25, 28)
	VPBROADCASTD (R9)(R10*2), Z28
	VDPBF16PS_Z(10, 24, 28)
	VDPBF16PS_Z(11, 25, 28)
	ADDQ $4, R8
	ADDQ $4, R9
	ADDQ $128, SI
	DECQ CX
	JNZ b16pair
	TESTQ $1, 56(DI)
	JZ b16plain
	VMOVUPS (R11), Z26
	VMOVUPS 64(R11), Z27
	ADDQ $128, R11
	VMULPS Z26, Z0, Z0
	VMULPS Z27, Z1, Z1
	VMULPS Z26, Z2, Z2
	VMULPS Z27, Z3, Z3
	VMULPS Z26, Z4, Z4
	VMULPS Z27, Z5, Z5
	VMULPS Z26, Z6, Z6
	VMULPS Z27, Z7, Z7
	VMULPS Z26, Z8, Z8
	VMULPS Z27, Z9, Z9
	VMULPS Z26, Z10, Z10
	VMULPS Z27, Z11, Z11
b16plain:
	TESTQ DX, DX
	JNZ b16add
	VMOVAPS Z0, Z12
	VMOVAPS Z1, Z13
	VMOVAPS Z2, Z14
	VMOVAPS Z3, Z15
	VMOVAPS Z4, Z16
	VMOVAPS Z5, Z17
	VMOVAPS Z6, Z18
	VMOVAPS Z7, Z19
	VMOVAPS Z8, Z20
	VMOVAPS Z9, Z21
	VMOVAPS Z10, Z22
	VMOVAPS Z11, Z23
	MOVQ $1, DX
	JMP b16next
b16add:
	VADDPS Z0, Z12, Z12
	VADDPS Z1, Z13, Z13
	VADDPS Z2, Z14, Z14
	VADDPS Z3, Z15, Z15
	VADDPS Z4, Z16, Z16
	VADDPS Z5, Z17, Z17
	VADDPS Z6, Z18, Z18
	VADDPS Z7, Z19, Z19
	VADDPS Z8, Z20, Z20
	VADDPS Z9, Z21, Z21
	VADDPS Z10, Z22, Z22
	VADDPS Z11, Z23, Z23
b16next:
	TESTQ BX, BX
	JNZ b16block
	MOVQ 32(DI), AX
	VMOVUPS Z12, 0(AX)
	VMOVUPS Z13, 64(AX)
	VMOVUPS Z14, 128(AX)
	VMOVUPS Z15, 192(AX)
	VMOVUPS Z16, 256(AX)
	VMOVUPS Z17, 320(AX)
	VMOVUPS Z18, 384(AX)
	VMOVUPS Z19, 448(AX)
	VMOVUPS Z20, 512(AX)
	VMOVUPS Z21, 576(AX)
	VMOVUPS Z22, 640(AX)
	VMOVUPS Z23, 704(AX)
	VZEROUPPER
	RET
