//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// hasFPAsm: the float-format decoding kernels (fpquant_amd64.s) need AVX2 (byte and dword
// widening, variable shifts, lane permutes).
var hasFPAsm = cpu.X86.HasAVX2 && cpu.X86.HasAVX

// e4m3DecodeAVX2 writes dst[g*glen + i] = e4m3(codes[g*glen + i]) * scales[g] for groups groups
// of glen codes, glen a multiple of 16 (fpquant.go describes the decoding). Implemented in
// fpquant_amd64.s.
//
//go:noescape
func e4m3DecodeAVX2(dst *float32, codes *uint8, scales *float32, groups, glen int)

// e4m3Decode512 is e4m3DecodeAVX2 in AVX-512F, bitwise the same values.
//
//go:noescape
func e4m3Decode512(dst *float32, codes *uint8, scales *float32, groups, glen int)

// e2m1DecodeAVX2 writes dst[g*glen + i] = e2m1(code i of group g) * scales[g] for groups groups
// of glen 4-bit codes packed 8 to a word, low nibble first, glen a multiple of 16.
//
//go:noescape
func e2m1DecodeAVX2(dst *float32, codes *uint32, scales *float32, groups, glen int)

// e2m1Decode512 is e2m1DecodeAVX2 in AVX-512F, bitwise the same values.
//
//go:noescape
func e2m1Decode512(dst *float32, codes *uint32, scales *float32, groups, glen int)
