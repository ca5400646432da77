//go:build amd64 && !purego

package qdot

// The amd64 int8 kernels (int8_*_amd64.s). Each multiplies one row tile by one panel over all
// of K; i8args and the panel layout are described in int8_pack.go.

//go:noescape
func i8AVX512Nib(a *i8args)

//go:noescape
func i8AVX512Byte(a *i8args)

//go:noescape
func i8VNNINib(a *i8args)

//go:noescape
func i8VNNIByte(a *i8args)

//go:noescape
func i8AVX2Nib(a *i8args)

//go:noescape
func i8AVX2Nib16(a *i8args)

//go:noescape
func i8AVX2ByteU(a *i8args)

//go:noescape
func i8AVX2ByteS(a *i8args)

//go:noescape
func i8Transpose(dst *uint32, src *uint32, stride int, jblocks int, shuf *[32]byte, xor uint32)

// The VPSHUFB controls of i8Transpose: bytes as they are, and each 8 bytes into octet order
// (0 2 4 6 1 3 5 7).
var (
	shufIdentity = [32]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	shufOctet    = [32]byte{0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15, 0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15}
)

// transposeBulk is transposeCols (int8_pack.go) for a full panel over the words j below the
// largest multiple of 8 of n, through i8Transpose (AVX2, which every amd64 int8 kernel has); it
// returns that multiple.
func transposeBulk(words, src []uint32, stride, n int, octet bool, xor uint32) int {
	jb := n / 8
	if jb == 0 {
		return 0
	}
	_ = words[8*jb*panelCols-1]
	_ = src[(panelCols-1)*stride+8*jb-1]
	shuf := &shufIdentity
	if octet {
		shuf = &shufOctet
	}
	i8Transpose(&words[0], &src[0], stride, jb, shuf, xor)
	return 8 * jb
}

// planInt8 is how kernel k stores src (int8_pack.go, i8plan). The VNNI kernels take unsigned
// weight bytes: MLX codes as they are, FP8's signed codes recentred (+128, corrected by -128 *
// sum(q_x)). VPMADDUBSW adds pairs of u8 * s8 products into 16 bits with saturation: codes
// below 64 (MLX up to 6 bits) go in as they are (pairs of at most 2 * 63 * 127); MLX's 8-bit
// codes are recentred to [-128, 127] (corrected by +128 * sum(q_x)) and, like FP8's signed
// codes, multiplied as |w| times sign(x, w) (pairs of at most 2 * 128 * 127 = 32512).
//
// With 4-bit codes and activation blocks of 32, the AVX2 kernel adds a block's pair sums in 16
// bits (i8AVX2Nib16: at most 8 * 2 * 15 * 127 = 30480) and widens them once per block.
func planInt8(k Kernel, src *i8src, block int) i8plan {
	p := i8plan{nibbles: src.nibbles, rows: 4, half: true, off: src.nibOff}
	switch k {
	case AVX512:
		p.rows, p.half, p.strided = 6, false, true
		p.fn = i8AVX512Byte
		if p.nibbles {
			p.fn = i8AVX512Nib
		}
	case AVXVNNI:
		p.fn = i8VNNIByte
		if p.nibbles {
			p.fn = i8VNNINib
		}
	case AVX2:
		switch {
		case p.nibbles && block == 32:
			p.fn = i8AVX2Nib16
		case p.nibbles:
			p.fn = i8AVX2Nib
		case src.wide:
			p.fn, p.xor, p.off = i8AVX2ByteS, 0x80808080, 128
		case src.signed:
			p.fn = i8AVX2ByteS
		default:
			p.fn = i8AVX2ByteU
		}
		return p
	default:
		panic("qdot: no int8 kernel " + k.String())
	}
	if src.signed {
		p.xor, p.off = 0x80808080, -128
	}
	return p
}
