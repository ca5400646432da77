//go:build !purego

#include "textflag.h"

// The instruction peaks the kernels are measured against (BenchmarkPeak): n rounds of 12
// independent zmm VPDPBUSD (or VDPBF16PS) on register operands, no loads.

// VDPBF16PS_P is bf16_amd64.s's VDPBF16PS_Z (the Go assembler has no VDPBF16PS).
#define VDPBF16PS_P(acc, w, x) BYTE $0x62; BYTE $(((1-((acc>>3)&1))<<7) | ((1-((x>>4)&1))<<6) | ((1-((x>>3)&1))<<5) | ((1-((acc>>4)&1))<<4) | 0x02); BYTE $(((15-(w&15))<<3) | 0x06); BYTE $(0x40 | ((1-((w>>4)&1))<<3)); BYTE $0x52; BYTE $(0xC0 | ((acc&7)<<3) | (x&7))

// func peakVNNI(n int)
TEXT ·peakVNNI(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VPXORD Z24, Z24, Z24
	VPXORD Z28, Z28, Z28
peakVNNI_loop:
	VPDPBUSD Z28, Z24, Z0
	VPDPBUSD Z28, Z24, Z1
	VPDPBUSD Z28, Z24, Z2
	VPDPBUSD Z28, Z24, Z3
	VPDPBUSD Z28, Z24, Z4
	VPDPBUSD Z28, Z24, Z5
	VPDPBUSD Z28, Z24, Z6
	VPDPBUSD Z28, Z24, Z7
	VPDPBUSD Z28, Z24, Z8
	VPDPBUSD Z28, Z24, Z9
	VPDPBUSD Z28, Z24, Z10
	VPDPBUSD Z28, Z24, Z11
	DECQ CX
	JNZ peakVNNI_loop
	VZEROUPPER
	RET

// func peakBF16(n int)
TEXT ·peakBF16(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VPXORD Z24, Z24, Z24
	VPXORD Z28, Z28, Z28
peakBF16_loop:
	VDPBF16PS_P(0, 24, 28)
	VDPBF16PS_P(1, 24, 28)
	VDPBF16PS_P(2, 24, 28)
	VDPBF16PS_P(3, 24, 28)
	VDPBF16PS_P(4, 24, 28)
	VDPBF16PS_P(5, 24, 28)
	VDPBF16PS_P(6, 24, 28)
	VDPBF16PS_P(7, 24, 28)
	VDPBF16PS_P(8, 24, 28)
	VDPBF16PS_P(9, 24, 28)
	VDPBF16PS_P(10, 24, 28)
	VDPBF16PS_P(11, 24, 28)
	DECQ CX
	JNZ peakBF16_loop
	VZEROUPPER
	RET
