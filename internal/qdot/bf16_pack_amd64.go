//go:build amd64 && !purego

package qdot

import "sync"

// The VDPBF16PS kernel multiplies a tile of 6 activation rows by a packed panel of 32 weight
// columns: for each pair p, 32 words, one per column, holding the column's elements 2p (low
// half) and 2p+1 (high half) as bfloat16; then, for FP8, the block scales [K blocks][32].

// b16args is the argument block of the VDPBF16PS kernel (offsets used by bf16_amd64.s).
type b16args struct {
	w      *uint32  // 0: the panel's first word
	x      *uint16  // 8: the tile's first activation row
	ldx    int      // 16: bytes between activation rows (2K)
	sc     *float32 // 24: the panel's block scales [K blocks][32] (scaled)
	out    *float32 // 32: result tile [6][32]
	kc     int      // 40: pairs per K block
	npairs int      // 48: pairs in K
	flags  int      // 56: 1 = scaled
}

// b16Scratch is one call's packed panel and result tile.
type b16Scratch struct {
	words []uint32
	sc    []float32
	row   []uint16
	out   [6 * panelCols]float32
}

var b16ScratchPool = sync.Pool{New: func() any { return new(b16Scratch) }}

// bf16Asm runs the VDPBF16PS kernel over columns [n0, n1), panel by panel, every row tile.
func bf16Asm(y []float32, ldy int, x *BF16Act, src *bsrc, n0, n1 int) {
	const R = 6
	K, kc := src.K, src.kblock
	nkb := ceilDiv(K, kc)
	sc := b16ScratchPool.Get().(*b16Scratch)
	defer b16ScratchPool.Put(sc)
	sc.words = grow(sc.words, K/2*panelCols)
	sc.sc = grow(sc.sc, nkb*panelCols)
	sc.row = grow(sc.row, K)
	args := b16args{ldx: 2 * K, sc: &sc.sc[0], out: &sc.out[0], kc: kc / 2, npairs: K / 2}
	if src.scaled {
		args.flags = 1
	}
	tiles := ceilDiv(x.T, R)
	for c0 := n0; c0 < n1; c0 += panelCols {
		cols := min(panelCols, n1-c0)
		if src.pairs != nil {
			transposeCols(sc.words, src.pairs[c0*K/2:(c0+cols)*K/2], K/2, K/2, cols, false, 0)
		} else {
			clear(sc.words)
			clear(sc.sc)
		}
		for j := 0; j < cols && src.pairs == nil; j++ {
			src.row(c0+j, sc.row)
			for p := 0; p < K/2; p++ {
				sc.words[p*panelCols+j] = uint32(sc.row[2*p]) | uint32(sc.row[2*p+1])<<16
			}
			if src.scaled {
				for b := 0; b < nkb; b++ {
					sc.sc[b*panelCols+j] = src.scale(c0+j, b)
				}
			}
		}
		args.w = &sc.words[0]
		for i := 0; i < tiles; i++ {
			args.x = &x.x[i*R*K]
			b16AVX512(&args)
			for r := 0; r < min(R, x.T-i*R); r++ {
				copy(y[(i*R+r)*ldy+c0-n0:(i*R+r)*ldy+c0-n0+cols], sc.out[r*panelCols:r*panelCols+cols])
			}
		}
	}
}
