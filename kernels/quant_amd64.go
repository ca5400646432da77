//go:build amd64 && !purego

package kernels

// hasQuantAsm: the dequantization chunk kernels (quant_amd64.s) need AVX2 (lane permutes,
// variable shifts, masked loads) and FMA.
var hasQuantAsm = hasAVX2FMA

// qDequantAVX2 dequantizes groups runs of chunks 32-element chunks of bits-bit codes with the
// scale-bias pairs sb into dst (quant.go describes the layout). Implemented in quant_amd64.s.
//
//go:noescape
func qDequantAVX2(dst *float32, codes *uint32, sb *float32, groups, chunks, bits int, tbl *qTable)

// qDequant512 is qDequantAVX2 in AVX-512F, bitwise the same values.
//
//go:noescape
func qDequant512(dst *float32, codes *uint32, sb *float32, groups, chunks, bits int, tbl *qTable)
