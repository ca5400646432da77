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

// Q6_K codes of one half h of a block: ql bytes a = (SI), q = 32(SI), qh bytes e = (DX); Y5
// holds 0x0f, Y6 0x03, Y7 32 in every byte. Writes 128 codes at DI: a's low nibbles with e's
// bits 0-1, q's low nibbles with bits 2-3, a's high nibbles with bits 4-5, q's high nibbles
// with bits 6-7 (as the fifth and sixth bits), each minus 32. VPSRLW shifts 16-bit lanes; the
// masks after it keep each byte's own bits.
#define Q6HALF \
	VMOVDQU (SI), Y0 \
	VMOVDQU 32(SI), Y1 \
	VMOVDQU (DX), Y2 \
	VPAND   Y5, Y0, Y3 \
	VPAND   Y6, Y2, Y4 \
	VPSLLW  $4, Y4, Y4 \
	VPOR    Y4, Y3, Y3 \
	VPSUBB  Y7, Y3, Y3 \
	VMOVDQU Y3, (DI) \
	VPAND   Y5, Y1, Y3 \
	VPSRLW  $2, Y2, Y4 \
	VPAND   Y6, Y4, Y4 \
	VPSLLW  $4, Y4, Y4 \
	VPOR    Y4, Y3, Y3 \
	VPSUBB  Y7, Y3, Y3 \
	VMOVDQU Y3, 32(DI) \
	VPSRLW  $4, Y0, Y3 \
	VPAND   Y5, Y3, Y3 \
	VPSRLW  $4, Y2, Y4 \
	VPAND   Y6, Y4, Y4 \
	VPSLLW  $4, Y4, Y4 \
	VPOR    Y4, Y3, Y3 \
	VPSUBB  Y7, Y3, Y3 \
	VMOVDQU Y3, 64(DI) \
	VPSRLW  $4, Y1, Y3 \
	VPAND   Y5, Y3, Y3 \
	VPSRLW  $6, Y2, Y4 \
	VPAND   Y6, Y4, Y4 \
	VPSLLW  $4, Y4, Y4 \
	VPOR    Y4, Y3, Y3 \
	VPSUBB  Y7, Y3, Y3 \
	VMOVDQU Y3, 96(DI)

// func q6CodesAVX2(c *byte, b *byte)
TEXT ·q6CodesAVX2(SB), NOSPLIT, $0-16
	MOVQ c+0(FP), DI
	MOVQ b+8(FP), SI
	LEAQ 128(SI), DX
	MOVL $0x0f0f0f0f, AX
	MOVD AX, X5
	VPBROADCASTD X5, Y5
	MOVL $0x03030303, AX
	MOVD AX, X6
	VPBROADCASTD X6, Y6
	MOVL $0x20202020, AX
	MOVD AX, X7
	VPBROADCASTD X7, Y7
	Q6HALF
	ADDQ $64, SI
	ADDQ $32, DX
	ADDQ $128, DI
	Q6HALF
	VZEROUPPER
	RET

// Q5_K codes of chunk k: the 32 qs bytes at (SI) give 64 codes at (DI), low nibbles with bit
// lo of the qh bytes in Y2 as the fifth bit, then high nibbles with bit lo+1; Y5 holds 0x0f and
// Y6 0x01 in every byte.
#define Q5KCHUNK(lo, hi) \
	VMOVDQU (SI), Y0 \
	VPAND   Y5, Y0, Y3 \
	VPSRLW  $lo, Y2, Y4 \
	VPAND   Y6, Y4, Y4 \
	VPSLLW  $4, Y4, Y4 \
	VPOR    Y4, Y3, Y3 \
	VMOVDQU Y3, (DI) \
	VPSRLW  $4, Y0, Y3 \
	VPAND   Y5, Y3, Y3 \
	VPSRLW  $hi, Y2, Y4 \
	VPAND   Y6, Y4, Y4 \
	VPSLLW  $4, Y4, Y4 \
	VPOR    Y4, Y3, Y3 \
	VMOVDQU Y3, 32(DI) \
	ADDQ    $32, SI \
	ADDQ    $64, DI

// func q5KCodesAVX2(c *byte, b *byte)
TEXT ·q5KCodesAVX2(SB), NOSPLIT, $0-16
	MOVQ    c+0(FP), DI
	MOVQ    b+8(FP), SI
	VMOVDQU 16(SI), Y2
	ADDQ    $48, SI
	MOVL    $0x0f0f0f0f, AX
	MOVD    AX, X5
	VPBROADCASTD X5, Y5
	MOVL    $0x01010101, AX
	MOVD    AX, X6
	VPBROADCASTD X6, Y6
	Q5KCHUNK(0, 1)
	Q5KCHUNK(2, 3)
	Q5KCHUNK(4, 5)
	Q5KCHUNK(6, 7)
	VZEROUPPER
	RET

// nibblePairs16 and nibblePairs32 of ggml_int8.go: the low and the high nibbles of the code
// bytes apart (VPAND, VPSRLW), neighbours joined by VPMADDUBSW with the byte weights 1, 16
// (words lo + 16 hi, at most 255), the words packed back to bytes (VPACKUSWB; for 32 bytes,
// VPERMQ puts the two lanes' halves in order).

// func nibblePairs16AVX2(c *byte, src *byte, stride, n int)
TEXT ·nibblePairs16AVX2(SB), NOSPLIT, $0-32
	MOVQ c+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), R8
	MOVQ n+24(FP), CX
	MOVQ $0x0f0f0f0f0f0f0f0f, AX
	MOVQ AX, X15
	VPBROADCASTQ X15, X15
	MOVQ $0x1001100110011001, AX
	MOVQ AX, X14
	VPBROADCASTQ X14, X14
	TESTQ CX, CX
	JZ    np16done
np16run:
	VMOVDQU    (SI), X0
	VPSRLW     $4, X0, X1
	VPAND      X15, X0, X0
	VPAND      X15, X1, X1
	VPMADDUBSW X14, X0, X0
	VPMADDUBSW X14, X1, X1
	VPACKUSWB  X1, X0, X0
	VMOVDQU    X0, (DI)
	ADDQ       R8, SI
	ADDQ       $16, DI
	DECQ       CX
	JNZ        np16run
np16done:
	RET

// Q4KHEAD writes the 8 sub-blocks' d * sc to (R8) and -(dmin * m) to (R9) from the Q4_K block
// head at SI (d, dmin, then the 12 scale bytes: scaleMinK4's bits, sub-blocks 0-3 in the low 6
// bits of bytes 0-3 and 4-7, 4-7 from the nibbles of bytes 8-11 and the top two bits of bytes
// 0-7), d and dmin through the float16 table at R10, Y13 the sign bit in each lane. Clobbers
// AX, BX, DX, R11-R13, Y0, Y1, Y10, Y11.
#define Q4KHEAD \
	MOVWLZX (SI), AX \
	VBROADCASTSS (R10)(AX*4), Y10 \
	MOVWLZX 2(SI), AX \
	VBROADCASTSS (R10)(AX*4), Y11 \
	MOVL 4(SI), AX \
	MOVL 8(SI), BX \
	MOVL 12(SI), DX \
	MOVL AX, R11 \
	ANDL $0x3f3f3f3f, R11 \
	MOVL AX, R12 \
	SHRL $6, R12 \
	ANDL $0x03030303, R12 \
	SHLL $4, R12 \
	MOVL DX, R13 \
	ANDL $0x0f0f0f0f, R13 \
	ORL  R13, R12 \
	SHLQ $32, R12 \
	ORQ  R11, R12 \
	MOVQ R12, X0 \
	MOVL BX, R11 \
	ANDL $0x3f3f3f3f, R11 \
	MOVL BX, R12 \
	SHRL $6, R12 \
	ANDL $0x03030303, R12 \
	SHLL $4, R12 \
	SHRL $4, DX \
	ANDL $0x0f0f0f0f, DX \
	ORL  DX, R12 \
	SHLQ $32, R12 \
	ORQ  R11, R12 \
	MOVQ R12, X1 \
	VPMOVZXBD X0, Y0 \
	VPMOVZXBD X1, Y1 \
	VCVTDQ2PS Y0, Y0 \
	VCVTDQ2PS Y1, Y1 \
	VMULPS    Y10, Y0, Y0 \
	VMULPS    Y11, Y1, Y1 \
	VXORPS    Y13, Y1, Y1 \
	VMOVUPS   Y0, (R8) \
	VMOVUPS   Y1, (R9)

// func q4KNibblesAVX2(c *byte, s, b *float32, blk *byte, n int, tab *float32)
// Per block (144 bytes: d, dmin, 12 scale bytes, 128 code bytes): the scales and mins of the
// 8 sub-blocks unpacked from the scale bytes in 32-bit words (scaleMinK4's bits: sub-blocks
// 0-3 in the low 6 bits of bytes 0-3 and 4-7; 4-7 from the nibbles of bytes 8-11 and the top
// two bits of bytes 0-7), widened, converted and multiplied by d (mins by dmin, negated by the
// sign bit); then the codes as nibblePairs32AVX2.
TEXT ·q4KNibblesAVX2(SB), NOSPLIT, $0-48
	MOVQ c+0(FP), DI
	MOVQ s+8(FP), R8
	MOVQ b+16(FP), R9
	MOVQ blk+24(FP), SI
	MOVQ n+32(FP), CX
	MOVQ tab+40(FP), R10
	MOVQ $0x0f0f0f0f0f0f0f0f, AX
	MOVQ AX, X15
	VPBROADCASTQ X15, Y15
	MOVQ $0x1001100110011001, AX
	MOVQ AX, X14
	VPBROADCASTQ X14, Y14
	MOVL $0x80000000, AX
	MOVL AX, X13
	VPBROADCASTD X13, Y13
	TESTQ CX, CX
	JZ    q4kdone
q4kblock:
	// Prefetch about 14 blocks ahead: the rows of a weight follow one another, and rows
	// streamed from DRAM are otherwise waited for a cache line at a time.
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	PREFETCHT0 2176(SI)
	Q4KHEAD
	// codes: 4 chunks of 32 bytes from offset 16.
	MOVQ $0, R11
q4kchunk:
	VMOVDQU    16(SI)(R11*1), Y0
	VPSRLW     $4, Y0, Y1
	VPAND      Y15, Y0, Y0
	VPAND      Y15, Y1, Y1
	VPMADDUBSW Y14, Y0, Y0
	VPMADDUBSW Y14, Y1, Y1
	VPACKUSWB  Y1, Y0, Y0
	VPERMQ     $0xD8, Y0, Y0
	VMOVDQU    Y0, (DI)(R11*1)
	ADDQ       $32, R11
	CMPQ       R11, $128
	JLT        q4kchunk
	ADDQ $144, SI
	ADDQ $128, DI
	ADDQ $32, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  q4kblock
q4kdone:
	VZEROUPPER
	RET

// q6KInt8 of ggml_int8.go for n Q6_K blocks (210 bytes: ql[128], qh[64], 16 int8 sub-scales, d):
// per block the codes by Q6HALF into the frame, then the 8 groups at once (even sub-scales a0,
// odd a1): rs = d * a as ggmlCodes computes it; where the two rs are the same bits the group
// keeps its codes (scale rs, mul 1, den 1), else a_M is the one of larger magnitude (a0 on a
// tie), scale (d * a_M) / 4, mul 4a, den a_M; then every run of 16 codes c as foldQ6K:
// RNE(float32(c * mul) / den), saturated to [-128, 127] by the packs.

DATA q6kShuf<>+0(SB)/8, $0x0e0c0a0806040200
DATA q6kShuf<>+8(SB)/8, $0x0f0d0b0907050301
GLOBL q6kShuf<>(SB), RODATA|NOPTR, $16

// Q6FOLDRUN folds the run of 16 codes at lo(SI), hi(SI) (8 each) into 16 bytes at lo(DI):
// each code times Y2 (mul), converted, divided by Y3 (den), rounded, saturated by the packs.
#define Q6FOLDRUN(lo, hi) \
	VPMOVSXBD    lo(SI), Y0 \
	VPMOVSXBD    hi(SI), Y1 \
	VPMULLD      Y2, Y0, Y0 \
	VPMULLD      Y2, Y1, Y1 \
	VCVTDQ2PS    Y0, Y0 \
	VCVTDQ2PS    Y1, Y1 \
	VDIVPS       Y3, Y0, Y0 \
	VDIVPS       Y3, Y1, Y1 \
	VCVTPS2DQ    Y0, Y0 \
	VCVTPS2DQ    Y1, Y1 \
	VPACKSSDW    Y1, Y0, Y0 \
	VPERMQ       $0xD8, Y0, Y0 \
	VEXTRACTI128 $1, Y0, X1 \
	VPACKSSWB    X1, X0, X0 \
	VMOVDQU      X0, lo(DI)

// func q6KInt8AVX2(q *int8, s *float32, blk *byte, n int, tab *float32)
// Frame: codes 0-255, mul of the even runs 256-287, of the odd runs 288-319, den 320-351.
TEXT ·q6KInt8AVX2(SB), NOSPLIT, $352-40
	MOVQ q+0(FP), R8
	MOVQ s+8(FP), R9
	MOVQ blk+16(FP), R10
	MOVQ n+24(FP), CX
	MOVQ tab+32(FP), R11
	TESTQ CX, CX
	JZ    q6kdone
q6kblock:
	PREFETCHT0 2048(R10)        // about 10 blocks ahead, as in q4KNibblesAVX2
	PREFETCHT0 2112(R10)
	PREFETCHT0 2176(R10)
	PREFETCHT0 2240(R10)
	// Codes q - 32 into the frame.
	MOVL $0x0f0f0f0f, AX
	MOVD AX, X5
	VPBROADCASTD X5, Y5
	MOVL $0x03030303, AX
	MOVD AX, X6
	VPBROADCASTD X6, Y6
	MOVL $0x20202020, AX
	MOVD AX, X7
	VPBROADCASTD X7, Y7
	MOVQ R10, SI
	LEAQ 128(R10), DX
	LEAQ 0(SP), DI
	Q6HALF
	ADDQ $64, SI
	ADDQ $32, DX
	ADDQ $128, DI
	Q6HALF
	// The 8 groups: Y1 = a0, Y2 = a1 (int32), Y3 = d.
	VMOVDQU      192(R10), X0
	VPSHUFB      q6kShuf<>(SB), X0, X0
	VPMOVSXBD    X0, Y1
	VPSRLDQ      $8, X0, X0
	VPMOVSXBD    X0, Y2
	MOVWLZX      208(R10), AX
	VBROADCASTSS (R11)(AX*4), Y3
	VCVTDQ2PS    Y1, Y4
	VMULPS       Y3, Y4, Y4   // rs0
	VCVTDQ2PS    Y2, Y5
	VMULPS       Y3, Y5, Y5   // rs1
	VPCMPEQD     Y5, Y4, Y6   // eq
	VPABSD       Y1, Y7
	VPABSD       Y2, Y8
	VPCMPGTD     Y7, Y8, Y9   // |a1| > |a0|
	VPBLENDVB    Y9, Y2, Y1, Y10 // a_M
	VCVTDQ2PS    Y10, Y11     // float a_M
	VMULPS       Y3, Y11, Y12
	MOVL         $0x3e800000, AX // 0.25
	MOVD         AX, X13
	VBROADCASTSS X13, Y13
	VMULPS       Y13, Y12, Y12 // (d a_M) / 4
	VBLENDVPS    Y6, Y4, Y12, Y12
	VMOVUPS      Y12, (R9)
	MOVL         $1, AX
	MOVD         AX, X13
	VPBROADCASTD X13, Y13     // 1
	VPSLLD       $2, Y1, Y14
	VPBLENDVB    Y6, Y13, Y14, Y14
	VMOVDQU      Y14, 256(SP)
	VPSLLD       $2, Y2, Y14
	VPBLENDVB    Y6, Y13, Y14, Y14
	VMOVDQU      Y14, 288(SP)
	VCVTDQ2PS    Y13, Y13     // 1.0
	VBLENDVPS    Y6, Y13, Y11, Y11
	VMOVUPS      Y11, 320(SP)
	// The runs: pair j (group j), its even run then its odd run.
	XORQ BX, BX
q6kgroup:
	VBROADCASTSS 320(SP)(BX*4), Y3
	VPBROADCASTD 256(SP)(BX*4), Y2
	MOVQ         BX, AX
	SHLQ         $5, AX
	LEAQ         0(SP)(AX*1), SI
	LEAQ         (R8)(AX*1), DI
	Q6FOLDRUN(0, 8)
	VPBROADCASTD 288(SP)(BX*4), Y2
	Q6FOLDRUN(16, 24)
	INCQ         BX
	CMPQ         BX, $8
	JLT          q6kgroup
	ADDQ $210, R10
	ADDQ $256, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  q6kblock
q6kdone:
	VZEROUPPER
	RET

// func iq4XSInt8AVX2(q *int8, s *float32, blk *byte, n int, tab *float32, kv *[16]int8)
// The int8 form of n IQ4_XS blocks (136 bytes: d, scales_h, scales_l[4], qs[128]), ggmlCodes's
// values: the 8 sub-block scales d * (ls - 32), ls = the sub-block's nibble of scales_l with its
// two bits of scales_h above, then the codes kv[nibble] (VPSHUFB), two sub-blocks a step: each
// sub-block's 16 low nibbles, then its 16 high ones.
TEXT ·iq4XSInt8AVX2(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), DI
	MOVQ s+8(FP), R8
	MOVQ blk+16(FP), SI
	MOVQ n+24(FP), CX
	MOVQ tab+32(FP), R10
	MOVQ kv+40(FP), R11
	VBROADCASTI128 (R11), Y4
	MOVL $0x0f0f0f0f, AX
	MOVD AX, X5
	VPBROADCASTD X5, Y5
	MOVL $32, AX
	MOVD AX, X6
	VPBROADCASTD X6, Y6
	TESTQ CX, CX
	JZ    iq4done
iq4block:
	PREFETCHT0 2048(SI)         // about 15 blocks ahead, as in q4KNibblesAVX2
	PREFETCHT0 2112(SI)
	PREFETCHT0 2176(SI)
	// ls bytes in sub-block order: scales_l's nibbles interleaved (low, high of each byte),
	// with (scales_h >> 2sb & 3) << 4 in byte sb, gathered into R9 from the top byte down.
	MOVL       4(SI), AX
	MOVD       AX, X0
	VPSRLW     $4, X0, X1
	VPAND      X5, X0, X0
	VPAND      X5, X1, X1
	VPUNPCKLBW X1, X0, X0
	MOVWLZX    2(SI), AX
	XORQ       R9, R9
	MOVQ       $8, BX
iq4sh:
	MOVQ AX, DX
	ANDQ $3, DX
	SHLQ $60, DX
	SHRQ $8, R9
	ORQ  DX, R9
	SHRQ $2, AX
	DECQ BX
	JNZ  iq4sh
	MOVQ         R9, X1
	VPOR         X1, X0, X0
	VPMOVZXBD    X0, Y0
	VPSUBD       Y6, Y0, Y0
	VCVTDQ2PS    Y0, Y0
	MOVWLZX      (SI), AX
	VBROADCASTSS (R10)(AX*4), Y1
	VMULPS       Y1, Y0, Y0
	VMOVUPS      Y0, (R8)
	XORQ         BX, BX
iq4codes:
	VMOVDQU    8(SI)(BX*1), Y0
	VPSRLW     $4, Y0, Y1
	VPAND      Y5, Y0, Y0
	VPAND      Y5, Y1, Y1
	VPSHUFB    Y0, Y4, Y0
	VPSHUFB    Y1, Y4, Y1
	VPERM2I128 $0x20, Y1, Y0, Y2
	VPERM2I128 $0x31, Y1, Y0, Y3
	VMOVDQU    Y2, (DI)(BX*2)
	VMOVDQU    Y3, 32(DI)(BX*2)
	ADDQ       $32, BX
	CMPQ       BX, $128
	JLT        iq4codes
	ADDQ $136, SI
	ADDQ $256, DI
	ADDQ $32, R8
	DECQ CX
	JNZ  iq4block
iq4done:
	VZEROUPPER
	RET

// func q4KScalesAVX2(s, b *float32, h *byte, stride, n int, tab *float32)
// Q4KHEAD for the n Q4_K block heads stride bytes apart at h, 8 scales to s and 8 offsets to b
// a block.
TEXT ·q4KScalesAVX2(SB), NOSPLIT, $0-48
	MOVQ s+0(FP), R8
	MOVQ b+8(FP), R9
	MOVQ h+16(FP), SI
	MOVQ stride+24(FP), DI
	MOVQ n+32(FP), CX
	MOVQ tab+40(FP), R10
	MOVL $0x80000000, AX
	MOVL AX, X13
	VPBROADCASTD X13, Y13
	TESTQ CX, CX
	JZ    q4ksdone
q4ksblock:
	Q4KHEAD
	ADDQ DI, SI
	ADDQ $32, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  q4ksblock
q4ksdone:
	VZEROUPPER
	RET
