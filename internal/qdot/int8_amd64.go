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
	p := i8plan{nibbles: src.nibbles, rows: 4, half: true}
	switch k {
	case AVX512:
		p.rows, p.half = 6, false
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
