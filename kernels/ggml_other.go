//go:build !amd64 || purego

package kernels

func ggmlApplyAVX2(dst *float32, codes *byte, s, o *float32, runs int) {
	panic("kernels: no assembly decoding kernels in this build")
}

func ggmlApply512(dst *float32, codes *byte, s, o *float32, runs int) {
	panic("kernels: no assembly decoding kernels in this build")
}

func nibbleTableAVX2(dst *byte, src *byte, stride int, kv *[16]int8, n int) {
	panic("kernels: no assembly decoding kernels in this build")
}

func nibble32AVX2(dst *byte, src *byte, n int) {
	panic("kernels: no assembly decoding kernels in this build")
}

func q6CodesAVX2(c *byte, b *byte) {
	panic("kernels: no assembly decoding kernels in this build")
}

func q5KCodesAVX2(c *byte, b *byte) {
	panic("kernels: no assembly decoding kernels in this build")
}

func q6KInt8AVX2(q *int8, s *float32, blk *byte, n int, tab *float32) {
	panic("kernels: no assembly decoding kernels in this build")
}

func nibblePairs16AVX2(c *byte, src *byte, stride, n int) {
	panic("kernels: no assembly decoding kernels in this build")
}

func q4KScalesAVX2(s, b *float32, h *byte, stride, n int, tab *float32) {
	panic("kernels: no assembly decoding kernels in this build")
}

func q4KNibblesAVX2(c *byte, s, b *float32, blk *byte, n int, tab *float32) {
	panic("kernels: no assembly decoding kernels in this build")
}

func iq4XSInt8AVX2(q *int8, s *float32, blk *byte, n int, tab *float32, kv *[16]int8) {
	panic("kernels: no assembly decoding kernels in this build")
}
