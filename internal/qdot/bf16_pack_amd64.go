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

// bf16Asm runs the VDPBF16PS kernel over columns [n0, n1): panels packed a block at a time (as
// int8Asm, at most blockBytes of words), every row tile over the block.
func bf16Asm(y []float32, ldy int, x *BF16Act, src *bsrc, n0, n1 int) {
	const R = 6
	K, kc := src.K, src.kblock
	nkb := ceilDiv(K, kc)
	sc := b16ScratchPool.Get().(*b16Scratch)
	defer b16ScratchPool.Put(sc)
	bp := max(1, min(ceilDiv(n1-n0, panelCols), blockBytes/(2*K*panelCols)))
	pw, ps := K/2*panelCols, nkb*panelCols // words and scales of one panel
	sc.words = grow(sc.words, bp*pw)
	sc.sc = grow(sc.sc, bp*ps)
	sc.row = grow(sc.row, K)
	args := b16args{ldx: 2 * K, out: &sc.out[0], kc: kc / 2, npairs: K / 2}
	if src.scaled {
		args.flags = 1
	}
	tiles := ceilDiv(x.T, R)
	for b0 := n0; b0 < n1; b0 += bp * panelCols {
		np := min(bp, ceilDiv(n1-b0, panelCols))
		for p := range np {
			sc.packBF16(src, b0+p*panelCols, min(panelCols, n1-b0-p*panelCols), sc.words[p*pw:(p+1)*pw], sc.sc[p*ps:(p+1)*ps])
		}
		for i := 0; i < tiles; i++ {
			args.x = &x.x[i*R*K]
			rows := min(R, x.T-i*R)
			for p := range np {
				c0 := b0 + p*panelCols
				cols := min(panelCols, n1-c0)
				args.w, args.sc = &sc.words[p*pw], &sc.sc[p*ps]
				b16AVX512(&args)
				for r := 0; r < rows; r++ {
					copy(y[(i*R+r)*ldy+c0-n0:(i*R+r)*ldy+c0-n0+cols], sc.out[r*panelCols:r*panelCols+cols])
				}
			}
		}
	}
}

// packBF16 packs the panel of columns [c0, c0+cols) of src into words (and, scaled, its block
// scales into scs); the columns from cols on are zero.
func (sc *b16Scratch) packBF16(src *bsrc, c0, cols int, words []uint32, scs []float32) {
	K := src.K
	if src.pairs != nil {
		transposeCols(words, src.pairs[c0*K/2:(c0+cols)*K/2], K/2, K/2, cols, false, 0)
		return
	}
	clear(words)
	clear(scs)
	for j := 0; j < cols; j++ {
		src.row(c0+j, sc.row)
		for p := 0; p < K/2; p++ {
			words[p*panelCols+j] = uint32(sc.row[2*p]) | uint32(sc.row[2*p+1])<<16
		}
		if src.scaled {
			for b := range len(scs) / panelCols {
				scs[b*panelCols+j] = src.scale(c0+j, b)
			}
		}
	}
}
