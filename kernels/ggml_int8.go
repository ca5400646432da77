package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/stratakernels/strata/internal/mem"
	"github.com/stratakernels/strata/internal/qdot"
	"github.com/stratakernels/strata/op"
)

// The int8 form of a GGML weight (compute mode int8): each row decoded by ggmlCodes (ggml.go)
// into signed 8-bit codes with a scale and offset per run of 16, handed to qdot's int8 kernels
// as a qdot.Int8Rows weight in groups of 32 (the activation block), read from the file's blocks
// on every call (no packed copy: resident bytes stay the file's).
//
// Where a group's two runs share their scale and offset, the group is exactly ggml's: codes as
// they are, scale s, bias o (the types with a min: Q4_1, Q5_1, Q4_K, Q5_K; the others have no
// bias). That is every group of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, IQ4_NL, IQ4_XS and
// MXFP4 (their scales and mins are per 32 or per block). Q2_K, Q3_K and Q6_K scale (and Q2_K
// offsets) each 16 elements apart, by integer sub-scales a_h times the block's d; a group whose
// halves differ is folded (foldQ3K, q6Fold) or requantized:
//   - Q3_K: codes a_h * c (c in [-4, 3], a_h in [-32, 31]) with scale d: exact, but for the
//     product 128 (a_h = -32, c = -4), which becomes 127 (off by d, 1/32 of that sub-block's
//     step).
//   - Q6_K: with a_M the sub-scale of larger magnitude (the first on a tie), scale d * a_M / 4
//     (exact) and codes 4c on a_M's half (exact; c in [-32, 31]), RNE(4 c a_h / a_M) on the
//     other, within an eighth of a_M's step d * a_M (a quarter where the code would be +128,
//     a_h = -a_M and c = -32, and becomes 127).
//   - Q2_K: from its exact values v (float64), bias B = (max v + min v) / 2 and scale S =
//     (max v - min v) / 254 rounded to float32, codes RNE((v - B) / S): within S/2.
// These errors are below what rounding the activations to 8 bits costs.

// ggmlHasMin reports whether type t's elements carry an offset (a min or Q4_1's m).
func ggmlHasMin(t op.GGMLType) bool {
	switch t {
	case op.GGMLQ4_1, op.GGMLQ5_1, op.GGMLQ2_K, op.GGMLQ4_K, op.GGMLQ5_K:
		return true
	}
	return false
}

// ggmlInt8 is m's int8 form (m a validated GGML weight): for Q4_0, Q4_1 and Q4_K, whose codes
// are 4-bit integers, also their nibble form (ggmlNibbleRow).
func ggmlInt8(m *op.Matrix) *qdot.Int8Rows {
	g, K := m.GG, m.K
	bias := ggmlHasMin(g.Type)
	w := &qdot.Int8Rows{N: m.N, K: K, Group: 32, Bias: bias, Row: func(n int, q []int8, s, b []float32) {
		ggmlInt8Row(g, K, n, bias, q, s, b)
	}}
	switch g.Type {
	case op.GGMLQ4_0, op.GGMLQ4_1, op.GGMLQ4_K:
		w.Nibbles = func(n int, c []byte, s, b []float32) { ggmlNibbleRow(g, K, n, c, s, b) }
		if g.Type == op.GGMLQ4_0 {
			w.NibbleOff = -8
		}
	}
	return w
}

// ggmlNibbleRow writes row n of a Q4_0, Q4_1 or Q4_K weight in the nibble form of
// qdot.Int8Rows: its 4-bit codes as stored (Q4_0's q, NibbleOff -8 below its int8 code q - 8),
// two to a byte in element order (c, len K/2), and ggmlInt8Row's group scales (s) and offsets
// (b, Q4_1 and Q4_K; len K/32). GGML stores a run's codes split in halves (the low nibbles of 16
// or 32 bytes, then their high nibbles); nibblePairs puts neighbours into one byte.
func ggmlNibbleRow(g *op.GGMLBlocks, K, n int, c []byte, s, b []float32) {
	tab := f16Tab()
	bs, ts := g.Type.BlockSize(), g.Type.TypeSize()
	data := g.Data[n*K/bs*ts : (n+1)*K/bs*ts]
	switch g.Type {
	case op.GGMLQ4_0, op.GGMLQ4_1:
		q := 2
		if g.Type == op.GGMLQ4_1 {
			q = 4
		}
		nibblePairs16(c, data[q:], ts, K/32)
		nibbleScales(g.Type, data, ts, K, s, b)
	case op.GGMLQ4_K:
		if useFPAsm() {
			q4KNibblesAVX2(&c[0], &s[0], &b[0], &data[0], K/256, &tab[0])
			return
		}
		for i := range K / 256 {
			nibblePairs32(c[128*i:128*i+128], data[i*144+16:(i+1)*144])
		}
		nibbleScales(g.Type, data, ts, K, s, b)
	}
}

// nibbleHead is the bytes of a Q4_0, Q4_1 or Q4_K block before its codes: the scale d (Q4_0),
// d and m (Q4_1), d, dmin and the 12 bytes of 6-bit sub-block scales and mins (Q4_K).
func nibbleHead(t op.GGMLType) int {
	switch t {
	case op.GGMLQ4_0:
		return 2
	case op.GGMLQ4_1:
		return 4
	}
	return 16
}

// nibbleScales writes ggmlNibbleRow's group scales (s) and offsets (b, Q4_1 and Q4_K) of one
// row of K elements from its blocks' heads, stride bytes apart in h (the row's blocks as
// stored, stride TypeSize; or their heads alone, stride nibbleHead); Q4_K's in assembly
// (q4KScalesAVX2) where the decoding kernels run.
func nibbleScales(t op.GGMLType, h []byte, stride, K int, s, b []float32) {
	tab := f16Tab()
	if t != op.GGMLQ4_K {
		for i := range K / 32 {
			blk := h[i*stride:]
			s[i] = tab[binary.LittleEndian.Uint16(blk)]
			if t == op.GGMLQ4_1 {
				b[i] = tab[binary.LittleEndian.Uint16(blk[2:])]
			}
		}
		return
	}
	if n := K / 256; useFPAsm() && n > 0 {
		_, _, _ = h[(n-1)*stride+15], s[8*n-1], b[8*n-1]
		q4KScalesAVX2(&s[0], &b[0], &h[0], stride, n, &tab[0])
		return
	}
	for i := range K / 256 {
		blk := h[i*stride : i*stride+16]
		d, dmin := tab[binary.LittleEndian.Uint16(blk)], tab[binary.LittleEndian.Uint16(blk[2:])]
		// scaleMinK4 for the 8 sub-blocks at once: bytes 0-3 of each word for sub-blocks
		// 0-3, bytes 8-11 (and the top bits of 0-7) for 4-7.
		u0, u1, u2 := binary.LittleEndian.Uint32(blk[4:]), binary.LittleEndian.Uint32(blk[8:]), binary.LittleEndian.Uint32(blk[12:])
		scs := [2]uint32{u0 & 0x3f3f3f3f, u2&0x0f0f0f0f | u0>>6&0x03030303<<4}
		mins := [2]uint32{u1 & 0x3f3f3f3f, u2>>4&0x0f0f0f0f | u1>>6&0x03030303<<4}
		sg, bg := s[8*i:8*i+8], b[8*i:8*i+8]
		for sb := range 8 {
			sc, m := float32(uint8(scs[sb/4]>>(8*(sb%4)))), float32(uint8(mins[sb/4]>>(8*(sb%4))))
			sg[sb], bg[sb] = d*sc, -(dmin * m)
		}
	}
}

// packNibbles packs w (ggmlInt8's form of a Q4_0, Q4_1 or Q4_K matrix g [N, K]) at load: its
// codes into the int8 kernels' panels (qdot.Int8Rows.PackNibbles), its blocks' heads copied
// out, so that the assembly kernels' products no longer read g.Data. A row's panel words are
// K/2 bytes and its heads the rest of its blocks: together the size of g.Data, and the rows
// of the last panel past N (zero). It returns the bytes held.
func packNibbles(w *qdot.Int8Rows, g *op.GGMLBlocks, N, K, workers int) (int64, error) {
	bs, ts, hs := g.Type.BlockSize(), g.Type.TypeSize(), nibbleHead(g.Type)
	nb := K / bs
	mem.PopulateRead(g.Data[:N*nb*ts])
	heads := make([]byte, N*nb*hs)
	for i := range N * nb {
		copy(heads[i*hs:(i+1)*hs], g.Data[i*ts:i*ts+hs])
	}
	w.Scales = func(n int, s, b []float32) { nibbleScales(g.Type, heads[n*nb*hs:(n+1)*nb*hs], hs, K, s, b) }
	if err := w.PackNibbles(workers); err != nil {
		w.Scales = nil
		return 0, err
	}
	return int64(len(heads)) + w.PackedBytes(), nil
}

// nibblePairs16 writes, for n runs of 32 codes held as 16 bytes at src + i*stride (codes 0-15
// in their low nibbles, 16-31 in their high ones), 16 bytes at c[16i:], code 2m in the low and
// 2m+1 in the high nibble of byte m (AVX2 where the CPU has it).
func nibblePairs16(c, src []byte, stride, n int) {
	if n == 0 {
		return
	}
	_, _ = c[16*n-1], src[(n-1)*stride+15]
	if useFPAsm() {
		nibblePairs16AVX2(&c[0], &src[0], stride, n)
		return
	}
	for i := range n {
		x, y := le64(src[i*stride:]), le64(src[i*stride+8:])
		put64(c[16*i:], pairLanes(x&lanes0f)|pairLanes(y&lanes0f)<<32)
		put64(c[16*i+8:], pairLanes(x>>4&lanes0f)|pairLanes(y>>4&lanes0f)<<32)
	}
}

// nibblePairs32 writes a Q4_K block's 128 code bytes (4 chunks of 32: sub-block 2j in the low
// nibbles, 2j+1 in the high ones) as 8 runs of 32 codes, 16 bytes each, in nibblePairs16's
// order (q4KNibblesAVX2 holds the same steps).
func nibblePairs32(c, src []byte) {
	_, _ = c[127], src[127]
	for j := range 4 {
		for h := range 2 {
			for l := range 4 {
				binary.LittleEndian.PutUint32(c[32*j+16*h+4*l:], uint32(pairLanes(le64(src[32*j+8*l:])>>(4*h)&lanes0f)))
			}
		}
	}
}

// pairLanes packs the 8 nibbles in the low halves of x's bytes into 4 bytes, byte 2m's into
// the low and byte 2m+1's into the high nibble of byte m.
func pairLanes(x uint64) uint64 {
	x = (x | x>>4) & 0x00ff00ff00ff00ff
	x = (x | x>>8) & 0x0000ffff0000ffff
	return (x | x>>16) & 0xffffffff
}

// ggmlInt8Row writes row n's int8 codes into q (len K), its group scales into s and (bias) its
// group offsets into b (len K/32).
func ggmlInt8Row(g *op.GGMLBlocks, K, n int, bias bool, q []int8, s, b []float32) {
	bs, ts := g.Type.BlockSize(), g.Type.TypeSize()
	b0, b1 := n*K/bs, (n+1)*K/bs
	if g.Type == op.GGMLQ6_K {
		q6KInt8(q, s, g.Data[b0*ts:b1*ts], b1-b0)
		return
	}
	if g.Type == op.GGMLIQ4_XS && useFPAsm() {
		iq4XSInt8AVX2(&q[0], &s[0], &g.Data[b0*ts], b1-b0, &f16Tab()[0], &ggmlKV)
		return
	}
	if t := g.Type; t != op.GGMLQ2_K && t != op.GGMLQ3_K {
		// Scales (and mins) per 32 or per block: every group's runs share them. The codes go
		// straight into q, 256 elements at a time.
		qb := unsafe.Slice((*byte)(unsafe.Pointer(&q[0])), K)
		var rs, ro [256 / ggmlRun]float32
		per := 256 / bs
		for blk := b0; blk < b1; blk += per {
			nb := min(per, b1-blk)
			e0 := (blk - b0) * bs
			ggmlCodes(t, g.Data[blk*ts:(blk+nb)*ts], nb, qb[e0:e0+nb*bs], rs[:], ro[:])
			sg := s[e0/32 : e0/32+nb*bs/32]
			for gi := range sg {
				sg[gi] = rs[2*gi]
			}
			if bias {
				bg := b[e0/32 : e0/32+nb*bs/32]
				for gi := range bg {
					bg[gi] = ro[2*gi]
				}
			}
		}
		return
	}
	var c [ggmlChunk]byte
	var rs, ro [ggmlChunk / ggmlRun]float32
	per := ggmlChunk / bs
	for blk := b0; blk < b1; blk += per {
		nb := min(per, b1-blk)
		ggmlCodes(g.Type, g.Data[blk*ts:(blk+nb)*ts], nb, c[:nb*bs], rs[:], ro[:])
		e0 := (blk - b0) * bs // first element of the chunk in the row
		for gi := 0; gi < nb*bs/32; gi++ {
			cs := c[32*gi : 32*gi+32]
			sa, sb, oa, ob := rs[2*gi], rs[2*gi+1], ro[2*gi], ro[2*gi+1]
			G := e0/32 + gi
			if math.Float32bits(sa) == math.Float32bits(sb) && math.Float32bits(oa) == math.Float32bits(ob) {
				for i, x := range cs {
					q[32*G+i] = int8(x)
				}
				s[G] = sa
				if bias {
					b[G] = oa
				}
				continue
			}
			if g.Type == op.GGMLQ3_K {
				foldQ3K(g.Data[(blk+gi/8)*ts:(blk+gi/8+1)*ts], 2*(gi%8), cs, q, s, G)
				continue
			}
			var v [32]float64
			lo, hi := math.Inf(1), math.Inf(-1)
			for i, x := range cs {
				sc, off := sa, oa
				if i >= 16 {
					sc, off = sb, ob
				}
				v[i] = float64(int8(x))*float64(sc) + float64(off)
				lo, hi = min(lo, v[i]), max(hi, v[i])
			}
			// Q2_K (the one type with a min whose runs differ).
			B, S := float32((hi+lo)/2), float32((hi-lo)/254)
			b[G] = B
			s[G] = S
			for i := range v {
				r := 0.0
				if S != 0 {
					r = math.RoundToEven((v[i] - float64(B)) / float64(S))
				}
				if r != r {
					r = 0 // a NaN element: the group's scale is NaN too
				}
				q[32*G+i] = int8(min(max(r, -127), 127))
			}
		}
	}
}

// q6KInt8 writes the int8 form of n Q6_K blocks (data): 256 codes a block into q, 8 group
// scales a block into s (q6Fold; AVX2 where the CPU has it).
func q6KInt8(q []int8, s []float32, data []byte, n int) {
	if n == 0 {
		return
	}
	_, _, _ = q[256*n-1], s[8*n-1], data[210*n-1]
	if useFPAsm() {
		q6KInt8AVX2(&q[0], &s[0], &data[0], n, &f16Tab()[0])
		return
	}
	var c [256]byte
	var rs, ro [16]float32
	for i := range n {
		blk := data[210*i : 210*i+210]
		ggmlCodes(op.GGMLQ6_K, blk, 1, c[:], rs[:], ro[:])
		q6Fold(q[256*i:256*i+256], c[:], rs[:], blk, s[8*i:8*i+8])
	}
}

// q6Fold writes the int8 form of one Q6_K block (ggml_int8.go): its 256 codes c (ggmlCodes's,
// with run scales rs) into q and its 8 group scales into s. A group whose runs share their
// scale keeps its codes; the others fold, every code by one division (foldQ6K).
func q6Fold(q []int8, c []byte, rs []float32, blk []byte, s []float32) {
	d := f16Tab()[binary.LittleEndian.Uint16(blk[208:])]
	var mul [16]int32
	var den [16]float32
	for j := range 8 {
		a0, a1 := int(int8(blk[192+2*j])), int(int8(blk[193+2*j]))
		if math.Float32bits(rs[2*j]) == math.Float32bits(rs[2*j+1]) {
			s[j] = rs[2*j]
			mul[2*j], mul[2*j+1], den[2*j], den[2*j+1] = 1, 1, 1, 1
			continue
		}
		aM := a0
		if abs(a1) > abs(a0) {
			aM = a1
		}
		s[j] = d * float32(aM) / 4
		mul[2*j], mul[2*j+1], den[2*j], den[2*j+1] = int32(4*a0), int32(4*a1), float32(aM), float32(aM)
		if aM == 0 {
			mul[2*j], mul[2*j+1], den[2*j], den[2*j+1] = 4, 4, 1, 1
		}
	}
	foldQ6K(q, c, &mul, &den)
}

// foldQ6K writes q[i] = RNE(float32(int8(c[i]) * mul[r]) / den[r]) clamped to [-128, 127] for
// the 16 runs r of 16 codes. With |mul[r] / den[r]| at most 4 (den the run pair's sub-scale
// of larger magnitude) the quotient is at most 128 in magnitude: float32 holds it within
// 2^-17, and a quotient that is not a tie lies at least 1/256 from one (its denominator is at
// most 128), so the rounding is the exact quotient's, RNE(4 c a_h / a_M).
func foldQ6K(q []int8, c []byte, mul *[16]int32, den *[16]float32) {
	_, _ = q[255], c[255]
	for r := range 16 {
		for i := 16 * r; i < 16*r+16; i++ {
			v := math.RoundToEven(float64(float32(int32(int8(c[i]))*mul[r]) / den[r]))
			q[i] = int8(min(max(v, -128), 127))
		}
	}
}

// foldQ3K writes group G of a Q3_K row (its 32 codes cs, from runs r and r+1 of block blk) as
// int8 codes a_h * c into q and its scale d into s[G] (ggml_int8.go describes the fold).
func foldQ3K(blk []byte, r int, cs []byte, q []int8, s []float32, G int) {
	var a [2]int
	sc := blk[96:108]
	for h := range 2 {
		g := r + h
		lo := sc[g%8]
		if g >= 8 {
			lo >>= 4
		}
		a[h] = int(lo&15|(sc[8+g%4]>>(2*(g/4))&3)<<4) - 32
	}
	s[G] = f16Tab()[binary.LittleEndian.Uint16(blk[108:])]
	for i, x := range cs {
		q[32*G+i] = int8(min(int(int8(x))*a[i/16], 127))
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
