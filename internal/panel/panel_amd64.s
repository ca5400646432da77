//go:build !purego

#include "textflag.h"

// AVX2+FMA panel kernels (see panel.go): the blocked products of the GDN chunked scan and
// attention, and the blocked SGEMM of internal/blas. Every output element c accumulates its
// terms as c = fma(a_j, b_j, c) for j = 0, 1, ..., k-1 in that order, whatever the tile it
// falls in, so a 6-row tile, the one-row kernel and any column tail give bitwise the same
// value for the same element.

// func fmaPanel6(c *float32, ldc int, a *float32, ars, as int, b **float32, n, k int, tail *int32)
//
// C[i, 0:n] += sum_{j<k} A[i*ars + j*as] * B_j[0:n] for the six rows i < 6, where B_j is the
// row that b[j] points to. ldc, ars, as are element strides; tail is the lane mask of the
// last n%8 columns (its first n%8 lanes set).
TEXT ·fmaPanel6(SB), NOSPLIT, $0-72
	MOVQ k+56(FP), CX
	TESTQ CX, CX
	JZ   done
	MOVQ c+0(FP), DI
	MOVQ ldc+8(FP), R8
	SHLQ $2, R8
	MOVQ ars+24(FP), R10
	SHLQ $2, R10
	MOVQ as+32(FP), BX
	SHLQ $2, BX
	MOVQ n+48(FP), R13
	XORQ AX, AX                   // column byte offset into the B rows

loop16:
	CMPQ R13, $16
	JLT  tail8
	// C rows 0..2 at DI, DI+R8, DI+2*R8; rows 3..5 at R12 = DI+3*R8, +R8, +2*R8.
	LEAQ (DI)(R8*2), R12
	ADDQ R8, R12
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS (DI)(R8*1), Y2
	VMOVUPS 32(DI)(R8*1), Y3
	VMOVUPS (DI)(R8*2), Y4
	VMOVUPS 32(DI)(R8*2), Y5
	VMOVUPS (R12), Y6
	VMOVUPS 32(R12), Y7
	VMOVUPS (R12)(R8*1), Y8
	VMOVUPS 32(R12)(R8*1), Y9
	VMOVUPS (R12)(R8*2), Y10
	VMOVUPS 32(R12)(R8*2), Y11
	MOVQ a+16(FP), R9             // A row 0, walking along j
	LEAQ (R9)(R10*2), R11
	ADDQ R10, R11                 // A row 3, walking along j
	MOVQ b+40(FP), SI
	MOVQ k+56(FP), CX

k16:
	MOVQ (SI), DX
	VMOVUPS (DX)(AX*1), Y12
	VMOVUPS 32(DX)(AX*1), Y13
	VBROADCASTSS (R9), Y14
	VFMADD231PS Y12, Y14, Y0
	VFMADD231PS Y13, Y14, Y1
	VBROADCASTSS (R9)(R10*1), Y15
	VFMADD231PS Y12, Y15, Y2
	VFMADD231PS Y13, Y15, Y3
	VBROADCASTSS (R9)(R10*2), Y14
	VFMADD231PS Y12, Y14, Y4
	VFMADD231PS Y13, Y14, Y5
	VBROADCASTSS (R11), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VBROADCASTSS (R11)(R10*1), Y14
	VFMADD231PS Y12, Y14, Y8
	VFMADD231PS Y13, Y14, Y9
	VBROADCASTSS (R11)(R10*2), Y15
	VFMADD231PS Y12, Y15, Y10
	VFMADD231PS Y13, Y15, Y11
	ADDQ $8, SI
	ADDQ BX, R9
	ADDQ BX, R11
	DECQ CX
	JNZ  k16

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, (DI)(R8*1)
	VMOVUPS Y3, 32(DI)(R8*1)
	VMOVUPS Y4, (DI)(R8*2)
	VMOVUPS Y5, 32(DI)(R8*2)
	VMOVUPS Y6, (R12)
	VMOVUPS Y7, 32(R12)
	VMOVUPS Y8, (R12)(R8*1)
	VMOVUPS Y9, 32(R12)(R8*1)
	VMOVUPS Y10, (R12)(R8*2)
	VMOVUPS Y11, 32(R12)(R8*2)
	ADDQ $64, DI
	ADDQ $64, AX
	SUBQ $16, R13
	JMP  loop16

tail8:
	CMPQ R13, $8
	JLT  tailmask
	LEAQ (DI)(R8*2), R12
	ADDQ R8, R12
	VMOVUPS (DI), Y0
	VMOVUPS (DI)(R8*1), Y2
	VMOVUPS (DI)(R8*2), Y4
	VMOVUPS (R12), Y6
	VMOVUPS (R12)(R8*1), Y8
	VMOVUPS (R12)(R8*2), Y10
	MOVQ a+16(FP), R9
	LEAQ (R9)(R10*2), R11
	ADDQ R10, R11
	MOVQ b+40(FP), SI
	MOVQ k+56(FP), CX

k8:
	MOVQ (SI), DX
	VMOVUPS (DX)(AX*1), Y12
	VBROADCASTSS (R9), Y14
	VFMADD231PS Y12, Y14, Y0
	VBROADCASTSS (R9)(R10*1), Y15
	VFMADD231PS Y12, Y15, Y2
	VBROADCASTSS (R9)(R10*2), Y14
	VFMADD231PS Y12, Y14, Y4
	VBROADCASTSS (R11), Y15
	VFMADD231PS Y12, Y15, Y6
	VBROADCASTSS (R11)(R10*1), Y14
	VFMADD231PS Y12, Y14, Y8
	VBROADCASTSS (R11)(R10*2), Y15
	VFMADD231PS Y12, Y15, Y10
	ADDQ $8, SI
	ADDQ BX, R9
	ADDQ BX, R11
	DECQ CX
	JNZ  k8

	VMOVUPS Y0, (DI)
	VMOVUPS Y2, (DI)(R8*1)
	VMOVUPS Y4, (DI)(R8*2)
	VMOVUPS Y6, (R12)
	VMOVUPS Y8, (R12)(R8*1)
	VMOVUPS Y10, (R12)(R8*2)
	ADDQ $32, DI
	ADDQ $32, AX
	SUBQ $8, R13

tailmask:
	TESTQ R13, R13
	JZ   done
	MOVQ tail+64(FP), DX
	VMOVUPS (DX), Y1              // lane mask of the last n%8 columns
	LEAQ (DI)(R8*2), R12
	ADDQ R8, R12
	VMASKMOVPS (DI), Y1, Y0
	VMASKMOVPS (DI)(R8*1), Y1, Y2
	VMASKMOVPS (DI)(R8*2), Y1, Y4
	VMASKMOVPS (R12), Y1, Y6
	VMASKMOVPS (R12)(R8*1), Y1, Y8
	VMASKMOVPS (R12)(R8*2), Y1, Y10
	MOVQ a+16(FP), R9
	LEAQ (R9)(R10*2), R11
	ADDQ R10, R11
	MOVQ b+40(FP), SI
	MOVQ k+56(FP), CX

kmask:
	MOVQ (SI), DX
	VMASKMOVPS (DX)(AX*1), Y1, Y12
	VBROADCASTSS (R9), Y14
	VFMADD231PS Y12, Y14, Y0
	VBROADCASTSS (R9)(R10*1), Y15
	VFMADD231PS Y12, Y15, Y2
	VBROADCASTSS (R9)(R10*2), Y14
	VFMADD231PS Y12, Y14, Y4
	VBROADCASTSS (R11), Y15
	VFMADD231PS Y12, Y15, Y6
	VBROADCASTSS (R11)(R10*1), Y14
	VFMADD231PS Y12, Y14, Y8
	VBROADCASTSS (R11)(R10*2), Y15
	VFMADD231PS Y12, Y15, Y10
	ADDQ $8, SI
	ADDQ BX, R9
	ADDQ BX, R11
	DECQ CX
	JNZ  kmask

	VMASKMOVPS Y0, Y1, (DI)
	VMASKMOVPS Y2, Y1, (DI)(R8*1)
	VMASKMOVPS Y4, Y1, (DI)(R8*2)
	VMASKMOVPS Y6, Y1, (R12)
	VMASKMOVPS Y8, Y1, (R12)(R8*1)
	VMASKMOVPS Y10, Y1, (R12)(R8*2)

done:
	VZEROUPPER
	RET

// func fmaPanel1(c *float32, a *float32, as int, b **float32, n, k int, tail *int32)
//
// The one-row form of fmaPanel6: c[0:n] += sum_{j<k} a[j*as] * B_j[0:n].
TEXT ·fmaPanel1(SB), NOSPLIT, $0-56
	MOVQ k+40(FP), CX
	TESTQ CX, CX
	JZ   done1
	MOVQ c+0(FP), DI
	MOVQ as+16(FP), BX
	SHLQ $2, BX
	MOVQ n+32(FP), R13
	XORQ AX, AX

loop32:
	CMPQ R13, $32
	JLT  row8
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	MOVQ a+8(FP), R9
	MOVQ b+24(FP), SI
	MOVQ k+40(FP), CX

r32:
	MOVQ (SI), DX
	VBROADCASTSS (R9), Y14
	VFMADD231PS (DX)(AX*1), Y14, Y0
	VFMADD231PS 32(DX)(AX*1), Y14, Y1
	VFMADD231PS 64(DX)(AX*1), Y14, Y2
	VFMADD231PS 96(DX)(AX*1), Y14, Y3
	ADDQ $8, SI
	ADDQ BX, R9
	DECQ CX
	JNZ  r32

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $128, AX
	SUBQ $32, R13
	JMP  loop32

row8:
	CMPQ R13, $8
	JLT  row1mask
	VMOVUPS (DI), Y0
	MOVQ a+8(FP), R9
	MOVQ b+24(FP), SI
	MOVQ k+40(FP), CX

r8:
	MOVQ (SI), DX
	VBROADCASTSS (R9), Y14
	VFMADD231PS (DX)(AX*1), Y14, Y0
	ADDQ $8, SI
	ADDQ BX, R9
	DECQ CX
	JNZ  r8

	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, AX
	SUBQ $8, R13
	JMP  row8

row1mask:
	TESTQ R13, R13
	JZ   done1
	MOVQ tail+48(FP), DX
	VMOVUPS (DX), Y1
	VMASKMOVPS (DI), Y1, Y0
	MOVQ a+8(FP), R9
	MOVQ b+24(FP), SI
	MOVQ k+40(FP), CX

rmask:
	MOVQ (SI), DX
	VMASKMOVPS (DX)(AX*1), Y1, Y12
	VBROADCASTSS (R9), Y14
	VFMADD231PS Y12, Y14, Y0
	ADDQ $8, SI
	ADDQ BX, R9
	DECQ CX
	JNZ  rmask

	VMASKMOVPS Y0, Y1, (DI)

done1:
	VZEROUPPER
	RET
