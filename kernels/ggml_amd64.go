//go:build amd64 && !purego

package kernels

// ggmlApplyAVX2 writes dst[i] = float32(int8(codes[i])) * s[i/16] + o[i/16] for runs runs of 16
// elements (ggml.go: ggmlApply), a multiply then an add as the portable loop. Implemented in
// ggml_amd64.s; needs AVX2 (hasFPAsm).
//
//go:noescape
func ggmlApplyAVX2(dst *float32, codes *byte, s, o *float32, runs int)

// ggmlApply512 is ggmlApplyAVX2 in AVX-512F, bitwise the same values.
//
//go:noescape
func ggmlApply512(dst *float32, codes *byte, s, o *float32, runs int)

// nibbleTableAVX2 is nibbleTable's loop (ggml.go) by VPSHUFB: for i < n, the 16 bytes at
// src + i*stride give 32 codes at dst + 32i, kv[low nibbles] then kv[high nibbles].
//
//go:noescape
func nibbleTableAVX2(dst *byte, src *byte, stride int, kv *[16]int8, n int)

// nibble32AVX2 is nibble32's loop (ggml.go): for i < n, the 32 bytes at src + 32i give 64
// codes at dst + 64i, low nibbles then high nibbles.
//
//go:noescape
func nibble32AVX2(dst *byte, src *byte, n int)

// q6CodesAVX2 is q6Codes's loop (ggml.go): the 256 codes q - 32 of the Q6_K block at b into c.
//
//go:noescape
func q6CodesAVX2(c *byte, b *byte)

// q5KCodesAVX2 is q5KCodes's loop (ggml.go): the 256 codes of the Q5_K block at b into c.
//
//go:noescape
func q5KCodesAVX2(c *byte, b *byte)

// q6KInt8AVX2 is q6KInt8 (ggml_int8.go) in AVX2 for n blocks at blk: codes into q (256 a
// block) and group scales into s (8 a block), the block scale d read through the float16
// table tab; bitwise ggmlCodes and q6Fold.
//
//go:noescape
func q6KInt8AVX2(q *int8, s *float32, blk *byte, n int, tab *float32)

// nibblePairs16AVX2 is nibblePairs16's loop (ggml_int8.go): for i < n, the 16 bytes at
// src + i*stride give 16 bytes at c + 16i.
//
//go:noescape
func nibblePairs16AVX2(c *byte, src *byte, stride, n int)

// q4KNibblesAVX2 is ggmlNibbleRow's Q4_K loop (ggml_int8.go) over n blocks at blk: codes by
// nibblePairs32's steps into c (128 bytes a block), and each sub-block's d * sc and
// -(dmin * m) into s and b (8 a block), d and dmin read through the float16 table tab.
//
//go:noescape
func q4KNibblesAVX2(c *byte, s, b *float32, blk *byte, n int, tab *float32)

// q4KScalesAVX2 is nibbleScales' Q4_K loop (ggml_int8.go) over the heads of n blocks, stride
// bytes apart at h: each sub-block's d * sc into s and -(dmin * m) into b (8 a block), d and
// dmin read through the float16 table tab, as q4KNibblesAVX2 writes them.
//
//go:noescape
func q4KScalesAVX2(s, b *float32, h *byte, stride, n int, tab *float32)

// iq4XSInt8AVX2 is ggmlInt8Row's IQ4_XS loop (ggml_int8.go) for n blocks at blk: the codes
// kv[nibble] into q (256 a block) and the sub-block scales into s (8 a block), d read through
// the float16 table tab; bitwise ggmlCodes's values.
//
//go:noescape
func iq4XSInt8AVX2(q *int8, s *float32, blk *byte, n int, tab *float32, kv *[16]int8)
