//go:build !purego

#include "textflag.h"

// AVX2+FMA pieces of the attention softmax (see attention_tile.go).

DATA attnExpC<>+0(SB)/4, $0x3fb8aa3b
DATA attnExpC<>+4(SB)/4, $0x3fb8aa3b
DATA attnExpC<>+8(SB)/4, $0x3fb8aa3b
DATA attnExpC<>+12(SB)/4, $0x3fb8aa3b
DATA attnExpC<>+16(SB)/4, $0x3fb8aa3b
DATA attnExpC<>+20(SB)/4, $0x3fb8aa3b
DATA attnExpC<>+24(SB)/4, $0x3fb8aa3b
DATA attnExpC<>+28(SB)/4, $0x3fb8aa3b
DATA attnExpC<>+32(SB)/4, $0xc2ae0000
DATA attnExpC<>+36(SB)/4, $0xc2ae0000
DATA attnExpC<>+40(SB)/4, $0xc2ae0000
DATA attnExpC<>+44(SB)/4, $0xc2ae0000
DATA attnExpC<>+48(SB)/4, $0xc2ae0000
DATA attnExpC<>+52(SB)/4, $0xc2ae0000
DATA attnExpC<>+56(SB)/4, $0xc2ae0000
DATA attnExpC<>+60(SB)/4, $0xc2ae0000
DATA attnExpC<>+64(SB)/4, $0x3f318000
DATA attnExpC<>+68(SB)/4, $0x3f318000
DATA attnExpC<>+72(SB)/4, $0x3f318000
DATA attnExpC<>+76(SB)/4, $0x3f318000
DATA attnExpC<>+80(SB)/4, $0x3f318000
DATA attnExpC<>+84(SB)/4, $0x3f318000
DATA attnExpC<>+88(SB)/4, $0x3f318000
DATA attnExpC<>+92(SB)/4, $0x3f318000
DATA attnExpC<>+96(SB)/4, $0xb95e8083
DATA attnExpC<>+100(SB)/4, $0xb95e8083
DATA attnExpC<>+104(SB)/4, $0xb95e8083
DATA attnExpC<>+108(SB)/4, $0xb95e8083
DATA attnExpC<>+112(SB)/4, $0xb95e8083
DATA attnExpC<>+116(SB)/4, $0xb95e8083
DATA attnExpC<>+120(SB)/4, $0xb95e8083
DATA attnExpC<>+124(SB)/4, $0xb95e8083
DATA attnExpC<>+128(SB)/4, $0x39506967
DATA attnExpC<>+132(SB)/4, $0x39506967
DATA attnExpC<>+136(SB)/4, $0x39506967
DATA attnExpC<>+140(SB)/4, $0x39506967
DATA attnExpC<>+144(SB)/4, $0x39506967
DATA attnExpC<>+148(SB)/4, $0x39506967
DATA attnExpC<>+152(SB)/4, $0x39506967
DATA attnExpC<>+156(SB)/4, $0x39506967
DATA attnExpC<>+160(SB)/4, $0x3ab743ce
DATA attnExpC<>+164(SB)/4, $0x3ab743ce
DATA attnExpC<>+168(SB)/4, $0x3ab743ce
DATA attnExpC<>+172(SB)/4, $0x3ab743ce
DATA attnExpC<>+176(SB)/4, $0x3ab743ce
DATA attnExpC<>+180(SB)/4, $0x3ab743ce
DATA attnExpC<>+184(SB)/4, $0x3ab743ce
DATA attnExpC<>+188(SB)/4, $0x3ab743ce
DATA attnExpC<>+192(SB)/4, $0x3c088908
DATA attnExpC<>+196(SB)/4, $0x3c088908
DATA attnExpC<>+200(SB)/4, $0x3c088908
DATA attnExpC<>+204(SB)/4, $0x3c088908
DATA attnExpC<>+208(SB)/4, $0x3c088908
DATA attnExpC<>+212(SB)/4, $0x3c088908
DATA attnExpC<>+216(SB)/4, $0x3c088908
DATA attnExpC<>+220(SB)/4, $0x3c088908
DATA attnExpC<>+224(SB)/4, $0x3d2aa9c1
DATA attnExpC<>+228(SB)/4, $0x3d2aa9c1
DATA attnExpC<>+232(SB)/4, $0x3d2aa9c1
DATA attnExpC<>+236(SB)/4, $0x3d2aa9c1
DATA attnExpC<>+240(SB)/4, $0x3d2aa9c1
DATA attnExpC<>+244(SB)/4, $0x3d2aa9c1
DATA attnExpC<>+248(SB)/4, $0x3d2aa9c1
DATA attnExpC<>+252(SB)/4, $0x3d2aa9c1
DATA attnExpC<>+256(SB)/4, $0x3e2aaaaa
DATA attnExpC<>+260(SB)/4, $0x3e2aaaaa
DATA attnExpC<>+264(SB)/4, $0x3e2aaaaa
DATA attnExpC<>+268(SB)/4, $0x3e2aaaaa
DATA attnExpC<>+272(SB)/4, $0x3e2aaaaa
DATA attnExpC<>+276(SB)/4, $0x3e2aaaaa
DATA attnExpC<>+280(SB)/4, $0x3e2aaaaa
DATA attnExpC<>+284(SB)/4, $0x3e2aaaaa
DATA attnExpC<>+288(SB)/4, $0x3f000000
DATA attnExpC<>+292(SB)/4, $0x3f000000
DATA attnExpC<>+296(SB)/4, $0x3f000000
DATA attnExpC<>+300(SB)/4, $0x3f000000
DATA attnExpC<>+304(SB)/4, $0x3f000000
DATA attnExpC<>+308(SB)/4, $0x3f000000
DATA attnExpC<>+312(SB)/4, $0x3f000000
DATA attnExpC<>+316(SB)/4, $0x3f000000
DATA attnExpC<>+320(SB)/4, $0x3f800000
DATA attnExpC<>+324(SB)/4, $0x3f800000
DATA attnExpC<>+328(SB)/4, $0x3f800000
DATA attnExpC<>+332(SB)/4, $0x3f800000
DATA attnExpC<>+336(SB)/4, $0x3f800000
DATA attnExpC<>+340(SB)/4, $0x3f800000
DATA attnExpC<>+344(SB)/4, $0x3f800000
DATA attnExpC<>+348(SB)/4, $0x3f800000
DATA attnExpC<>+352(SB)/4, $0x0000007f
DATA attnExpC<>+356(SB)/4, $0x0000007f
DATA attnExpC<>+360(SB)/4, $0x0000007f
DATA attnExpC<>+364(SB)/4, $0x0000007f
DATA attnExpC<>+368(SB)/4, $0x0000007f
DATA attnExpC<>+372(SB)/4, $0x0000007f
DATA attnExpC<>+376(SB)/4, $0x0000007f
DATA attnExpC<>+380(SB)/4, $0x0000007f
DATA attnExpC<>+384(SB)/4, $0xff800000
DATA attnExpC<>+388(SB)/4, $0xff800000
DATA attnExpC<>+392(SB)/4, $0xff800000
DATA attnExpC<>+396(SB)/4, $0xff800000
DATA attnExpC<>+400(SB)/4, $0xff800000
DATA attnExpC<>+404(SB)/4, $0xff800000
DATA attnExpC<>+408(SB)/4, $0xff800000
DATA attnExpC<>+412(SB)/4, $0xff800000
GLOBL attnExpC<>(SB), RODATA|NOPTR, $416

// EXP(x, t0, t1, t2, t3) replaces the 8 lanes of x <= 0 by exp(x): n = round(x log2 e),
// r = x - n ln2 (ln2 split in two, as Cephes expf), exp(r) by its degree-7 polynomial, times 2^n
// built in the exponent bits. Lanes below -87 (where 2^n would leave the normal range) and -Inf
// give exactly 0, so masked scores contribute nothing; NaN lanes stay NaN (the mask is "not
// less than -87", true for NaN, and the polynomial carries the NaN). Relative error about 1e-7.
#define EXP(x, t0, t1, t2, t3) \
	VCMPPS $0x15, attnExpC<>+32(SB), x, t0; \
	VMULPS attnExpC<>+0(SB), x, t1; \
	VROUNDPS $0, t1, t1; \
	VFNMADD231PS attnExpC<>+64(SB), t1, x; \
	VFNMADD231PS attnExpC<>+96(SB), t1, x; \
	VMOVUPS attnExpC<>+128(SB), t2; \
	VFMADD213PS attnExpC<>+160(SB), x, t2; \
	VFMADD213PS attnExpC<>+192(SB), x, t2; \
	VFMADD213PS attnExpC<>+224(SB), x, t2; \
	VFMADD213PS attnExpC<>+256(SB), x, t2; \
	VFMADD213PS attnExpC<>+288(SB), x, t2; \
	VMULPS x, x, t3; \
	VFMADD213PS x, t3, t2; \
	VADDPS attnExpC<>+320(SB), t2, t2; \
	VCVTPS2DQ t1, t1; \
	VPADDD attnExpC<>+352(SB), t1, t1; \
	VPSLLD $23, t1, t1; \
	VMULPS t1, t2, x; \
	VANDPS t0, x, x

// func attnSoftmax8(st *float32, rp, nc int, scale float32, m, l, alpha *float32)
//
// The online-softmax step of 8 score rows: st holds the raw scores of the rows at st[c*rp+i],
// i < 8, for the nc keys of the block (-Inf where masked). With s = scale*st: mNew = max(m,
// max_c s), st = exp(s - mNew), alpha = exp(m - mNew), l = l*alpha + sum_c st (the sum in key
// order), m = mNew. A NaN score is left out of the max (an unordered VMAXPS lane returns the
// running max, its Intel second source) and gives a NaN probability, so its row's sum is NaN:
// IEEE propagation, as the portable attnSoftmaxGo computes it.
TEXT ·attnSoftmax8(SB), NOSPLIT, $0-56
	MOVQ st+0(FP), DI
	MOVQ rp+8(FP), R8
	SHLQ $2, R8
	MOVQ nc+16(FP), CX
	VBROADCASTSS scale+24(FP), Y15
	VMOVUPS attnExpC<>+384(SB), Y0     // running block max, -Inf
	MOVQ DI, SI
	MOVQ CX, DX
	TESTQ DX, DX
	JZ   smax
pass1:
	VMULPS (SI), Y15, Y1
	VMOVUPS Y1, (SI)
	VMAXPS Y0, Y1, Y0
	ADDQ R8, SI
	DECQ DX
	JNZ  pass1
smax:
	MOVQ m+32(FP), R9
	VMOVUPS (R9), Y2                   // m
	VMAXPS Y0, Y2, Y3                  // mNew
	VXORPS Y4, Y4, Y4                  // sum
	MOVQ DI, SI
	MOVQ CX, DX
	TESTQ DX, DX
	JZ   salpha
pass2:
	VMOVUPS (SI), Y1
	VSUBPS Y3, Y1, Y1
	EXP(Y1, Y6, Y7, Y8, Y9)
	VMOVUPS Y1, (SI)
	VADDPS Y1, Y4, Y4
	ADDQ R8, SI
	DECQ DX
	JNZ  pass2
salpha:
	VSUBPS Y3, Y2, Y1
	EXP(Y1, Y6, Y7, Y8, Y9)
	MOVQ l+40(FP), R10
	VMULPS (R10), Y1, Y5
	VADDPS Y4, Y5, Y5
	VMOVUPS Y5, (R10)
	VMOVUPS Y3, (R9)
	MOVQ alpha+48(FP), R11
	VMOVUPS Y1, (R11)
	VZEROUPPER
	RET

// func attnScale8(x *float32, n int, s float32)
//
// x[i] *= s for i < n, n a multiple of 8.
TEXT ·attnScale8(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	JZ   sdone
	VBROADCASTSS s+16(FP), Y15
sloop:
	VMULPS (DI), Y15, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	DECQ CX
	JNZ  sloop
sdone:
	VZEROUPPER
	RET

// func attnScores4x3(st *float32, rp int, q **float32, nq4 int, keys **float32, nk3 int, n int, pf **float32)
//
// st[c*rp + r] = q_r . k_c (n floats, n a positive multiple of 8) for the query rows q_r the
// table q points to (4*nq4 entries) and the key rows k_c of the table keys (3*nk3 entries):
// key triples in order, within each the query rows four at a time. Each dot product is eight
// lane sums accumulated by FMA in order of the index, then added pairwise (lanes 0+1, 2+3, 4+5,
// 6+7; then 01+23, 45+67; then the two halves). Spread over the products, the rows of the next
// key triple and the rows of the table pf (3*nk3 entries, n floats each; the value rows the
// caller reads next) are prefetched, one row of each per group of four query rows (three at
// most a triple).
TEXT ·attnScores4x3(SB), NOSPLIT, $8-64
	MOVQ nk3+40(FP), AX
	TESTQ AX, AX
	JZ   sdone4
	MOVQ st+0(FP), AX
	MOVQ AX, stb-8(SP)            // st row of the triple's first key
	MOVQ keys+32(FP), SI
	MOVQ n+48(FP), DX
	SHLQ $2, DX                   // row length in bytes

ktrip:
	MOVQ (SI), R11
	MOVQ 8(SI), R12
	MOVQ 16(SI), R13
	MOVQ nq4+24(FP), R15
	MOVQ stb-8(SP), CX            // lane of the quad's first query row in the first key's row
hquad:
	// Query rows of quad qi = nq4 - R15; prefetch rows m = min(qi, 2) of pf's triple and of the
	// next key triple (of this one on the last triple).
	MOVQ nq4+24(FP), AX
	SUBQ R15, AX
	MOVQ AX, R8
	SHLQ $5, R8
	ADDQ q+16(FP), R8
	MOVQ 8(R8), R9
	MOVQ 16(R8), R10
	MOVQ 24(R8), R14
	MOVQ (R8), R8
	CMPQ AX, $2
	JLE  mok
	MOVQ $2, AX
mok:
	SHLQ $3, AX
	MOVQ SI, BX
	SUBQ keys+32(FP), BX
	ADDQ pf+56(FP), BX
	MOVQ (BX)(AX*1), BX
	MOVQ (SI)(AX*1), DI
	CMPQ nk3+40(FP), $1
	JEQ  lastk
	MOVQ 24(SI)(AX*1), DI
lastk:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	XORQ AX, AX
dloop4:
	VMOVUPS (R11)(AX*1), Y12
	VMOVUPS (R12)(AX*1), Y13
	VMOVUPS (R13)(AX*1), Y14
	VMOVUPS (R8)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y0
	VFMADD231PS Y15, Y13, Y4
	VFMADD231PS Y15, Y14, Y8
	VMOVUPS (R9)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y1
	VFMADD231PS Y15, Y13, Y5
	VFMADD231PS Y15, Y14, Y9
	PREFETCHT0 (BX)(AX*1)
	PREFETCHT0 (DI)(AX*1)
	VMOVUPS (R10)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y2
	VFMADD231PS Y15, Y13, Y6
	VFMADD231PS Y15, Y14, Y10
	VMOVUPS (R14)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y15, Y13, Y7
	VFMADD231PS Y15, Y14, Y11
	ADDQ $32, AX
	CMPQ AX, DX
	JLT  dloop4

	// Y0..Y3: key 0 with rows 0..3; Y4..Y7 key 1; Y8..Y11 key 2. Sums of Y0..Y7 into one
	// vector (key 0 in the low half, key 1 in the high), of Y8..Y11 into a half.
	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VHADDPS Y5, Y4, Y4
	VHADDPS Y7, Y6, Y6
	VHADDPS Y9, Y8, Y8
	VHADDPS Y11, Y10, Y10
	VHADDPS Y2, Y0, Y0
	VHADDPS Y6, Y4, Y4
	VHADDPS Y10, Y8, Y8
	VPERM2F128 $0x20, Y4, Y0, Y1
	VPERM2F128 $0x31, Y4, Y0, Y2
	VADDPS Y2, Y1, Y1
	VEXTRACTF128 $1, Y8, X9
	VADDPS X9, X8, X8
	VEXTRACTF128 $1, Y1, X2
	MOVQ rp+8(FP), R8
	SHLQ $2, R8                   // row stride of st in bytes
	VMOVUPS X1, (CX)
	VMOVUPS X2, (CX)(R8*1)
	VMOVUPS X8, (CX)(R8*2)
	ADDQ $16, CX                  // the next four lanes
	DECQ R15
	JNZ  hquad

	MOVQ rp+8(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R8
	ADDQ R8, stb-8(SP)            // three st rows on
	ADDQ $24, SI
	DECQ nk3+40(FP)
	JNZ  ktrip
sdone4:
	VZEROUPPER
	RET

