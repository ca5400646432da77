//go:build !purego

#include "textflag.h"

// AVX2+FMA activations: sigmoid, silu, SwiGLU and the GatedResidual read's gated stream mean
// (math_act.go). Every lane is computed on its own by the same instruction sequence, so an
// element's bits do not depend on its position, its neighbours or how a row was split.

// Constants, each broadcast to 8 lanes: log2(e), the clamp of the exp argument (-88), ln 2 in
// two parts (Cephes expf's C1 + C2), the degree-5 polynomial of (e^r - 1 - r) / r^2 on
// |r| <= ln2/2 (Cephes expf), 1.0, the float32 exponent bias and the sign bit.
// log2e at +0
DATA actC<>+0(SB)/4, $0x3fb8aa3b
DATA actC<>+4(SB)/4, $0x3fb8aa3b
DATA actC<>+8(SB)/4, $0x3fb8aa3b
DATA actC<>+12(SB)/4, $0x3fb8aa3b
DATA actC<>+16(SB)/4, $0x3fb8aa3b
DATA actC<>+20(SB)/4, $0x3fb8aa3b
DATA actC<>+24(SB)/4, $0x3fb8aa3b
DATA actC<>+28(SB)/4, $0x3fb8aa3b
// clamp at +32
DATA actC<>+32(SB)/4, $0xc2b00000
DATA actC<>+36(SB)/4, $0xc2b00000
DATA actC<>+40(SB)/4, $0xc2b00000
DATA actC<>+44(SB)/4, $0xc2b00000
DATA actC<>+48(SB)/4, $0xc2b00000
DATA actC<>+52(SB)/4, $0xc2b00000
DATA actC<>+56(SB)/4, $0xc2b00000
DATA actC<>+60(SB)/4, $0xc2b00000
// c1 at +64
DATA actC<>+64(SB)/4, $0x3f318000
DATA actC<>+68(SB)/4, $0x3f318000
DATA actC<>+72(SB)/4, $0x3f318000
DATA actC<>+76(SB)/4, $0x3f318000
DATA actC<>+80(SB)/4, $0x3f318000
DATA actC<>+84(SB)/4, $0x3f318000
DATA actC<>+88(SB)/4, $0x3f318000
DATA actC<>+92(SB)/4, $0x3f318000
// c2 at +96
DATA actC<>+96(SB)/4, $0xb95e8083
DATA actC<>+100(SB)/4, $0xb95e8083
DATA actC<>+104(SB)/4, $0xb95e8083
DATA actC<>+108(SB)/4, $0xb95e8083
DATA actC<>+112(SB)/4, $0xb95e8083
DATA actC<>+116(SB)/4, $0xb95e8083
DATA actC<>+120(SB)/4, $0xb95e8083
DATA actC<>+124(SB)/4, $0xb95e8083
// p0 at +128
DATA actC<>+128(SB)/4, $0x39506967
DATA actC<>+132(SB)/4, $0x39506967
DATA actC<>+136(SB)/4, $0x39506967
DATA actC<>+140(SB)/4, $0x39506967
DATA actC<>+144(SB)/4, $0x39506967
DATA actC<>+148(SB)/4, $0x39506967
DATA actC<>+152(SB)/4, $0x39506967
DATA actC<>+156(SB)/4, $0x39506967
// p1 at +160
DATA actC<>+160(SB)/4, $0x3ab743ce
DATA actC<>+164(SB)/4, $0x3ab743ce
DATA actC<>+168(SB)/4, $0x3ab743ce
DATA actC<>+172(SB)/4, $0x3ab743ce
DATA actC<>+176(SB)/4, $0x3ab743ce
DATA actC<>+180(SB)/4, $0x3ab743ce
DATA actC<>+184(SB)/4, $0x3ab743ce
DATA actC<>+188(SB)/4, $0x3ab743ce
// p2 at +192
DATA actC<>+192(SB)/4, $0x3c088908
DATA actC<>+196(SB)/4, $0x3c088908
DATA actC<>+200(SB)/4, $0x3c088908
DATA actC<>+204(SB)/4, $0x3c088908
DATA actC<>+208(SB)/4, $0x3c088908
DATA actC<>+212(SB)/4, $0x3c088908
DATA actC<>+216(SB)/4, $0x3c088908
DATA actC<>+220(SB)/4, $0x3c088908
// p3 at +224
DATA actC<>+224(SB)/4, $0x3d2aa9c1
DATA actC<>+228(SB)/4, $0x3d2aa9c1
DATA actC<>+232(SB)/4, $0x3d2aa9c1
DATA actC<>+236(SB)/4, $0x3d2aa9c1
DATA actC<>+240(SB)/4, $0x3d2aa9c1
DATA actC<>+244(SB)/4, $0x3d2aa9c1
DATA actC<>+248(SB)/4, $0x3d2aa9c1
DATA actC<>+252(SB)/4, $0x3d2aa9c1
// p4 at +256
DATA actC<>+256(SB)/4, $0x3e2aaaaa
DATA actC<>+260(SB)/4, $0x3e2aaaaa
DATA actC<>+264(SB)/4, $0x3e2aaaaa
DATA actC<>+268(SB)/4, $0x3e2aaaaa
DATA actC<>+272(SB)/4, $0x3e2aaaaa
DATA actC<>+276(SB)/4, $0x3e2aaaaa
DATA actC<>+280(SB)/4, $0x3e2aaaaa
DATA actC<>+284(SB)/4, $0x3e2aaaaa
// p5 at +288
DATA actC<>+288(SB)/4, $0x3f000000
DATA actC<>+292(SB)/4, $0x3f000000
DATA actC<>+296(SB)/4, $0x3f000000
DATA actC<>+300(SB)/4, $0x3f000000
DATA actC<>+304(SB)/4, $0x3f000000
DATA actC<>+308(SB)/4, $0x3f000000
DATA actC<>+312(SB)/4, $0x3f000000
DATA actC<>+316(SB)/4, $0x3f000000
// one at +320
DATA actC<>+320(SB)/4, $0x3f800000
DATA actC<>+324(SB)/4, $0x3f800000
DATA actC<>+328(SB)/4, $0x3f800000
DATA actC<>+332(SB)/4, $0x3f800000
DATA actC<>+336(SB)/4, $0x3f800000
DATA actC<>+340(SB)/4, $0x3f800000
DATA actC<>+344(SB)/4, $0x3f800000
DATA actC<>+348(SB)/4, $0x3f800000
// bias at +352
DATA actC<>+352(SB)/4, $0x0000007f
DATA actC<>+356(SB)/4, $0x0000007f
DATA actC<>+360(SB)/4, $0x0000007f
DATA actC<>+364(SB)/4, $0x0000007f
DATA actC<>+368(SB)/4, $0x0000007f
DATA actC<>+372(SB)/4, $0x0000007f
DATA actC<>+376(SB)/4, $0x0000007f
DATA actC<>+380(SB)/4, $0x0000007f
// sign at +384
DATA actC<>+384(SB)/4, $0x80000000
DATA actC<>+388(SB)/4, $0x80000000
DATA actC<>+392(SB)/4, $0x80000000
DATA actC<>+396(SB)/4, $0x80000000
DATA actC<>+400(SB)/4, $0x80000000
DATA actC<>+404(SB)/4, $0x80000000
DATA actC<>+408(SB)/4, $0x80000000
DATA actC<>+412(SB)/4, $0x80000000
GLOBL actC<>(SB), RODATA|NOPTR, $416

// SIGMOID(x, s, t1, t2, t3, t4) sets s = 1 / (1 + e^-x) for the 8 lanes of x (x kept).
// e = e^(-|x|) is in (0, 1]: y = max(-|x|, -88) (NaN stays NaN: VMAXPS returns its second
// source when either is NaN), n = round(y log2 e), r = y - n ln2, e^r = 1 + r + r^2 P(r),
// e = e^r 2^n with 2^n built in the exponent field (n = -127 gives 0, so e^y below about
// 2^-126.5 flushes to 0). Then s = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, one
// correctly rounded division: about 2 float32 ulp from the exact logistic function.
#define SIGMOID(x, s, t1, t2, t3, t4) \
	VORPS actC<>+384(SB), x, t1; \
	VMOVUPS actC<>+32(SB), t2; \
	VMAXPS t1, t2, t1; \
	VMULPS actC<>+0(SB), t1, t2; \
	VROUNDPS $0, t2, t2; \
	VFNMADD231PS actC<>+64(SB), t2, t1; \
	VFNMADD231PS actC<>+96(SB), t2, t1; \
	VMOVUPS actC<>+128(SB), t3; \
	VFMADD213PS actC<>+160(SB), t1, t3; \
	VFMADD213PS actC<>+192(SB), t1, t3; \
	VFMADD213PS actC<>+224(SB), t1, t3; \
	VFMADD213PS actC<>+256(SB), t1, t3; \
	VFMADD213PS actC<>+288(SB), t1, t3; \
	VMULPS t1, t1, t4; \
	VFMADD213PS t1, t4, t3; \
	VADDPS actC<>+320(SB), t3, t3; \
	VCVTPS2DQ t2, t2; \
	VPADDD actC<>+352(SB), t2, t2; \
	VPSLLD $23, t2, t2; \
	VMULPS t2, t3, t1; \
	VADDPS actC<>+320(SB), t1, t2; \
	VMOVUPS actC<>+320(SB), t3; \
	VBLENDVPS x, t1, t3, t3; \
	VDIVPS t2, t3, s

// func actSigmoid8(dst, src *float32, n int, div float32)
//
// dst[i] = sigmoid(src[i] / div) for i < n, n a multiple of 8.
TEXT ·actSigmoid8(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS div+24(FP), Y7
	SHRQ $3, CX
	JZ   sigdone

sigloop:
	VMOVUPS (SI), Y0
	VDIVPS  Y7, Y0, Y0
	SIGMOID(Y0, Y5, Y1, Y2, Y3, Y4)
	VMOVUPS Y5, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     sigloop

sigdone:
	VZEROUPPER
	RET

// func actSiLU8(dst, src *float32, n int, div float32)
//
// dst[i] = v * sigmoid(v), v = src[i] / div, for i < n, n a multiple of 8.
TEXT ·actSiLU8(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS div+24(FP), Y7
	SHRQ $3, CX
	JZ   siludone

siluloop:
	VMOVUPS (SI), Y0
	VDIVPS  Y7, Y0, Y0
	SIGMOID(Y0, Y5, Y1, Y2, Y3, Y4)
	VMULPS  Y0, Y5, Y5
	VMOVUPS Y5, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     siluloop

siludone:
	VZEROUPPER
	RET

// func actSigmoidMul8(o, gate *float32, n int)
//
// o[i] = o[i] * sigmoid(gate[i]) for i < n, n a multiple of 8.
TEXT ·actSigmoidMul8(SB), NOSPLIT, $0-24
	MOVQ o+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   smuldone

smulloop:
	VMOVUPS (SI), Y0
	SIGMOID(Y0, Y5, Y1, Y2, Y3, Y4)
	VMULPS  (DI), Y5, Y5
	VMOVUPS Y5, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     smulloop

smuldone:
	VZEROUPPER
	RET

// func actSwiGLU8(h, gate, u *float32, n int)
//
// h[i] = (gate[i] * sigmoid(gate[i])) * u[i] for i < n, n a multiple of 8.
TEXT ·actSwiGLU8(SB), NOSPLIT, $0-32
	MOVQ h+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ u+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   swidone

swiloop:
	VMOVUPS (SI), Y0
	SIGMOID(Y0, Y5, Y1, Y2, Y3, Y4)
	VMULPS  Y0, Y5, Y5
	VMULPS  (DX), Y5, Y5
	VMOVUPS Y5, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     swiloop

swidone:
	VZEROUPPER
	RET

// func actGRMean8(x, a, h *float32, D, S, n int, fS float32)
//
// x[d] = (sum over s < S in order of sigmoid(a[s*D+d]) * h[s*D+d]) / fS for d < n, n a
// multiple of 8, S >= 1; one fused multiply-add per stream into a float32 sum that starts at 0.
TEXT ·actGRMean8(SB), NOSPLIT, $0-52
	MOVQ x+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ h+16(FP), DX
	MOVQ D+24(FP), R8
	SHLQ $2, R8
	MOVQ S+32(FP), R9
	MOVQ n+40(FP), CX
	VBROADCASTSS fS+48(FP), Y7
	SHRQ $3, CX
	JZ   grdone

grcol:
	MOVQ   SI, R10
	MOVQ   DX, R11
	MOVQ   R9, R12
	VXORPS Y6, Y6, Y6

grstream:
	VMOVUPS (R10), Y0
	SIGMOID(Y0, Y5, Y1, Y2, Y3, Y4)
	VFMADD231PS (R11), Y5, Y6
	ADDQ    R8, R10
	ADDQ    R8, R11
	DECQ    R12
	JNZ     grstream

	VDIVPS  Y7, Y6, Y6
	VMOVUPS Y6, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     grcol

grdone:
	VZEROUPPER
	RET
