//go:build arm64 && !purego

package qdot

// The NEON int8 kernels (int8_arm64.s), with the dot-product extension.

//go:noescape
func i8NEONNib(a *i8args)

//go:noescape
func i8NEONByte(a *i8args)

// planInt8 is how kernel k (NEON) stores src (int8_pack.go, i8plan). SDOT multiplies signed
// bytes: codes below 128 (MLX up to 6 bits, FP8's int8 codes) go in as they are, MLX's 8-bit
// codes recentred to [-128, 127] and corrected by +128 * sum(q_x).
func planInt8(k Kernel, src *i8src, _ int) i8plan {
	if k != NEON {
		panic("qdot: no int8 kernel " + k.String())
	}
	p := i8plan{nibbles: src.nibbles, rows: 4, half: true, fn: i8NEONByte, off: src.nibOff}
	if p.nibbles {
		p.fn = i8NEONNib
	}
	if src.wide {
		p.xor, p.off = 0x80808080, 128
	}
	return p
}

// transposeBulk: the NEON build transposes panels in Go (transposeCols).
func transposeBulk(_, _ []uint32, _, _ int, _ bool, _ uint32) int { return 0 }
