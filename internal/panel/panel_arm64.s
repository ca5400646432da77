//go:build !purego

#include "textflag.h"

// NEON panel kernels (see panel.go): the arm64 counterparts of panel_amd64.s with the same
// contract. Every output element c accumulates its terms as c = fma(a_j, b_j, c), j = 0, 1,
// ..., k-1 in that order (FMLA in the vector columns, FMADD in the scalar tail columns: both
// round once), so the tiling does not change any result.

// func fmaPanel6(c *float32, ldc int, a *float32, ars, as int, b **float32, n, k int, tail *int32)
//
// C[i, 0:n] += sum_{j<k} A[i*ars + j*as] * B_j[0:n] for the six rows i < 6. tail is unused
// (the last columns run one at a time).
TEXT ·fmaPanel6(SB), NOSPLIT, $0-72
	MOVD k+56(FP), R7
	CBZ  R7, p6done
	MOVD c+0(FP), R0
	MOVD ldc+8(FP), R1
	LSL  $2, R1, R1
	MOVD ars+24(FP), R3
	LSL  $2, R3, R3
	MOVD as+32(FP), R4
	LSL  $2, R4, R4
	MOVD b+40(FP), R5
	MOVD n+48(FP), R6
	MOVD $0, R8                  // column byte offset into the B rows

p6loop8:
	CMP  $8, R6
	BLT  p6tail4
	MOVD R0, R19
	ADD R1, R19, R20
	ADD R1, R20, R21
	ADD R1, R21, R22
	ADD R1, R22, R23
	ADD R1, R23, R24
	VLD1 (R19), [V0.S4, V1.S4]
	VLD1 (R20), [V2.S4, V3.S4]
	VLD1 (R21), [V4.S4, V5.S4]
	VLD1 (R22), [V6.S4, V7.S4]
	VLD1 (R23), [V8.S4, V9.S4]
	VLD1 (R24), [V10.S4, V11.S4]
	MOVD a+16(FP), R9
	ADD R3, R9, R10
	ADD R3, R10, R11
	ADD R3, R11, R12
	ADD R3, R12, R13
	ADD R3, R13, R14
	MOVD R5, R15
	MOVD R7, R16
p6k8:
	MOVD.P 8(R15), R17
	ADD R8, R17, R17
	VLD1 (R17), [V24.S4, V25.S4]
	VLD1R.P (R9)(R4), [V26.S4]
	VLD1R.P (R10)(R4), [V27.S4]
	VLD1R.P (R11)(R4), [V28.S4]
	VLD1R.P (R12)(R4), [V29.S4]
	VLD1R.P (R13)(R4), [V30.S4]
	VLD1R.P (R14)(R4), [V31.S4]
	VFMLA V24.S4, V26.S4, V0.S4
	VFMLA V25.S4, V26.S4, V1.S4
	VFMLA V24.S4, V27.S4, V2.S4
	VFMLA V25.S4, V27.S4, V3.S4
	VFMLA V24.S4, V28.S4, V4.S4
	VFMLA V25.S4, V28.S4, V5.S4
	VFMLA V24.S4, V29.S4, V6.S4
	VFMLA V25.S4, V29.S4, V7.S4
	VFMLA V24.S4, V30.S4, V8.S4
	VFMLA V25.S4, V30.S4, V9.S4
	VFMLA V24.S4, V31.S4, V10.S4
	VFMLA V25.S4, V31.S4, V11.S4
	SUBS $1, R16, R16
	BNE  p6k8
	VST1 [V0.S4, V1.S4], (R19)
	VST1 [V2.S4, V3.S4], (R20)
	VST1 [V4.S4, V5.S4], (R21)
	VST1 [V6.S4, V7.S4], (R22)
	VST1 [V8.S4, V9.S4], (R23)
	VST1 [V10.S4, V11.S4], (R24)
	ADD $32, R0, R0
	ADD $32, R8, R8
	SUB $8, R6, R6
	B    p6loop8

p6tail4:
	CMP  $4, R6
	BLT  p6tail1
	MOVD R0, R19
	ADD R1, R19, R20
	ADD R1, R20, R21
	ADD R1, R21, R22
	ADD R1, R22, R23
	ADD R1, R23, R24
	VLD1 (R19), [V0.S4]
	VLD1 (R20), [V2.S4]
	VLD1 (R21), [V4.S4]
	VLD1 (R22), [V6.S4]
	VLD1 (R23), [V8.S4]
	VLD1 (R24), [V10.S4]
	MOVD a+16(FP), R9
	ADD R3, R9, R10
	ADD R3, R10, R11
	ADD R3, R11, R12
	ADD R3, R12, R13
	ADD R3, R13, R14
	MOVD R5, R15
	MOVD R7, R16
p6k4:
	MOVD.P 8(R15), R17
	ADD R8, R17, R17
	VLD1 (R17), [V24.S4]
	VLD1R.P (R9)(R4), [V26.S4]
	VLD1R.P (R10)(R4), [V27.S4]
	VLD1R.P (R11)(R4), [V28.S4]
	VLD1R.P (R12)(R4), [V29.S4]
	VLD1R.P (R13)(R4), [V30.S4]
	VLD1R.P (R14)(R4), [V31.S4]
	VFMLA V24.S4, V26.S4, V0.S4
	VFMLA V24.S4, V27.S4, V2.S4
	VFMLA V24.S4, V28.S4, V4.S4
	VFMLA V24.S4, V29.S4, V6.S4
	VFMLA V24.S4, V30.S4, V8.S4
	VFMLA V24.S4, V31.S4, V10.S4
	SUBS $1, R16, R16
	BNE  p6k4
	VST1 [V0.S4], (R19)
	VST1 [V2.S4], (R20)
	VST1 [V4.S4], (R21)
	VST1 [V6.S4], (R22)
	VST1 [V8.S4], (R23)
	VST1 [V10.S4], (R24)
	ADD $16, R0, R0
	ADD $16, R8, R8
	SUB $4, R6, R6

p6tail1:
	CBZ  R6, p6done
	MOVD R0, R19
	ADD R1, R19, R20
	ADD R1, R20, R21
	ADD R1, R21, R22
	ADD R1, R22, R23
	ADD R1, R23, R24
	FMOVS (R19), F0
	FMOVS (R20), F1
	FMOVS (R21), F2
	FMOVS (R22), F3
	FMOVS (R23), F4
	FMOVS (R24), F5
	MOVD a+16(FP), R9
	ADD R3, R9, R10
	ADD R3, R10, R11
	ADD R3, R11, R12
	ADD R3, R12, R13
	ADD R3, R13, R14
	MOVD R5, R15
	MOVD R7, R16
p6k1:
	MOVD.P 8(R15), R17
	ADD R8, R17, R17
	FMOVS (R17), F24
	FMOVS (R9), F26
	ADD R4, R9, R9
	FMOVS (R10), F27
	ADD R4, R10, R10
	FMOVS (R11), F28
	ADD R4, R11, R11
	FMOVS (R12), F29
	ADD R4, R12, R12
	FMOVS (R13), F30
	ADD R4, R13, R13
	FMOVS (R14), F31
	ADD R4, R14, R14
	FMADDS F24, F0, F26, F0
	FMADDS F24, F1, F27, F1
	FMADDS F24, F2, F28, F2
	FMADDS F24, F3, F29, F3
	FMADDS F24, F4, F30, F4
	FMADDS F24, F5, F31, F5
	SUBS $1, R16, R16
	BNE  p6k1
	FMOVS F0, (R19)
	FMOVS F1, (R20)
	FMOVS F2, (R21)
	FMOVS F3, (R22)
	FMOVS F4, (R23)
	FMOVS F5, (R24)
	ADD $4, R0, R0
	ADD $4, R8, R8
	SUB $1, R6, R6
	B    p6tail1

p6done:
	RET

// func fmaPanel1(c *float32, a *float32, as int, b **float32, n, k int, tail *int32)
//
// The one-row form of fmaPanel6: c[0:n] += sum_{j<k} a[j*as] * B_j[0:n].
TEXT ·fmaPanel1(SB), NOSPLIT, $0-56
	MOVD k+40(FP), R7
	CBZ  R7, p1done
	MOVD c+0(FP), R0
	MOVD as+16(FP), R4
	LSL  $2, R4, R4
	MOVD b+24(FP), R5
	MOVD n+32(FP), R6
	MOVD $0, R8

p1loop16:
	CMP  $16, R6
	BLT  p1loop4
	VLD1 (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	MOVD a+8(FP), R9
	MOVD R5, R15
	MOVD R7, R16
p1k16:
	MOVD.P 8(R15), R17
	ADD R8, R17, R17
	VLD1 (R17), [V24.S4, V25.S4, V26.S4, V27.S4]
	VLD1R.P (R9)(R4), [V28.S4]
	VFMLA V24.S4, V28.S4, V0.S4
	VFMLA V25.S4, V28.S4, V1.S4
	VFMLA V26.S4, V28.S4, V2.S4
	VFMLA V27.S4, V28.S4, V3.S4
	SUBS $1, R16, R16
	BNE  p1k16
	VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R0)
	ADD $64, R0, R0
	ADD $64, R8, R8
	SUB $16, R6, R6
	B    p1loop16

p1loop4:
	CMP  $4, R6
	BLT  p1loop1
	VLD1 (R0), [V0.S4]
	MOVD a+8(FP), R9
	MOVD R5, R15
	MOVD R7, R16
p1k4:
	MOVD.P 8(R15), R17
	ADD R8, R17, R17
	VLD1 (R17), [V24.S4]
	VLD1R.P (R9)(R4), [V28.S4]
	VFMLA V24.S4, V28.S4, V0.S4
	SUBS $1, R16, R16
	BNE  p1k4
	VST1 [V0.S4], (R0)
	ADD $16, R0, R0
	ADD $16, R8, R8
	SUB $4, R6, R6
	B    p1loop4

p1loop1:
	CBZ  R6, p1done
	FMOVS (R0), F0
	MOVD a+8(FP), R9
	MOVD R5, R15
	MOVD R7, R16
p1k1:
	MOVD.P 8(R15), R17
	ADD R8, R17, R17
	FMOVS (R17), F24
	FMOVS (R9), F28
	ADD R4, R9, R9
	FMADDS F24, F0, F28, F0
	SUBS $1, R16, R16
	BNE  p1k1
	FMOVS F0, (R0)
	ADD $4, R0, R0
	ADD $4, R8, R8
	SUB $1, R6, R6
	B    p1loop1

p1done:
	RET
