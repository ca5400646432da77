package optest

import (
	"encoding/binary"
	"math"

	"github.com/stratakernels/strata/op"
	"github.com/x448/float16"
)

// float64 reference of the GGML block types (op.GGMLBlocks), decoded element by element from
// the block layouts of ggml's block_<type> structs (ggml/src/ggml-common.h) with the values of
// ggml's dequantize_row_<type> (ggml/src/ggml-quants.c), read in llama.cpp of 2026-08 and
// written here from those definitions (no table or bit trick shared with any backend).
//
// Every block is little-endian; "half" is an IEEE binary16 widened exactly. Offsets in bytes:
//
//	Q4_0   (32, 18 B):  d half @0, qs[16] @2. Element j < 16 is the low nibble of qs[j], element
//	                    16 + j its high nibble; w = (q - 8) * d.
//	Q4_1   (32, 20 B):  d @0, m @2, qs[16] @4 as Q4_0; w = q * d + m.
//	Q5_0   (32, 22 B):  d @0, qh uint32 @2, qs[16] @6: the 4 low bits as Q4_0, bit e of qh the
//	                    fifth bit of element e; w = (q - 16) * d.
//	Q5_1   (32, 24 B):  d @0, m @2, qh @4, qs @8 as Q5_0; w = q * d + m.
//	Q8_0   (32, 34 B):  d @0, qs int8[32] @2; w = q * d.
//	Q2_K   (256, 84 B): scales[16] @0 (low nibble scale, high nibble min of sub-block s of 16
//	                    elements), qs[64] @16, d @80, dmin @82. Element e: half h = e / 128,
//	                    r = e % 128, j = r / 32, l = r % 32: q = qs[32h + l] >> 2j & 3, sub-block
//	                    s = 8h + 2j + l/16; w = d*sc_s * q - dmin*m_s.
//	Q3_K   (256, 110 B): hmask[32] @0, qs[64] @32, scales[12] @96, d @108. The 16 6-bit scales:
//	                    low 4 bits from byte s (s < 8, low nibble) or s - 8 (high nibble), high
//	                    2 bits from byte 8 + s%4 at bit 2*(s/4); the scale is that minus 32.
//	                    Element e as Q2_K for q2 and s; its third bit is hmask[e % 32] >> (e/32)
//	                    & 1; w = d*(sc_s - 32) * (q2 - (bit ? 0 : 4)).
//	Q4_K   (256, 144 B): d @0, dmin @2, scales[12] @4, qs[128] @16. Sub-block s (of 32) has 6-bit
//	                    scale sc and min m: for s < 4, sc = b[s] & 63, m = b[s+4] & 63; else
//	                    sc = b[s+4] & 15 | (b[s-4] >> 6) << 4, m = b[s+4] >> 4 | (b[s] >> 6) << 4
//	                    (b the scales bytes). Element e: chunk c = e / 64, r = e % 64: q is the
//	                    low (r < 32) or high nibble of qs[32c + r%32], s = 2c + r/32;
//	                    w = d*sc_s * q - dmin*m_s.
//	Q5_K   (256, 176 B): d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48: Q4_K plus a fifth
//	                    bit qh[e % 32] >> s & 1 (s the sub-block), q + 16*bit.
//	Q6_K   (256, 210 B): ql[128] @0, qh[64] @128, scales int8[16] @192, d @208. Element e: half
//	                    h = e / 128, r = e % 128, quarter k = r / 32, l = r % 32: the low 4 bits
//	                    are the low (k = 0, 1) or high (k = 2, 3) nibble of ql[64h + l + 32*(k%2)],
//	                    the high 2 bits qh[32h + l] >> 2k & 3; sub-block s = 8h + 2k + l/16;
//	                    w = d*sc_s * (q - 32).
//	IQ4_NL (32, 18 B):  d @0, qs[16] @2 as Q4_0; w = d * kvalues[q], kvalues the non-linear
//	                    table {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69,
//	                    89, 113}.
//	IQ4_XS (256, 136 B): d @0, scales_h uint16 @2, scales_l[4] @4, qs[128] @8. Sub-block s (of
//	                    32): ls = (scales_l[s/2] >> 4*(s%2)) & 15 | (scales_h >> 2s & 3) << 4;
//	                    its 16 bytes qs[16s:] as IQ4_NL; w = d*(ls - 32) * kvalues[q].
//	MXFP4  (32, 17 B):  e uint8 @0, qs[16] @1 as Q4_0; w = kv[q] * 2^(e - 128), kv the doubled
//	                    E2M1 table {0, 1, 2, 3, 4, 6, 8, 12, and negated} (ggml's
//	                    GGML_E8M0_TO_FP32_HALF: e = 0 and 1 the float32 subnormals 2^-128 and
//	                    2^-127; e = 255 is 2^127, finite, unlike mlx's E8M0).
//
// ggml computes these in float32, and its products are exact there: d*sc (11 + 6 or 8
// significant bits), then times q (at most 24 bits in all: Q4_K 21, Q5_K 22, IQ4_XS 24), so
// the one rounding of ggml's arithmetic is the final subtraction of the min (Q4_1, Q5_1, Q2_K,
// Q4_K, Q5_K: dmin*m is exact too) or, for Q6_K, the product d*sc * (q - 32) (up to 25 bits).
// The reference computes each element exactly in float64 and rounds it once to float32, so its
// values are bitwise ggml's (a compiler contracting ggml's multiply-subtract into a fused one
// gives the same bits, the product being exact). A backend must produce exactly these values.

// kvaluesIQ4NL is ggml's non-linear 4-bit table (IQ4_NL, IQ4_XS).
var kvaluesIQ4NL = [16]int{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// kvaluesMXFP4 is ggml's MXFP4 table: the E2M1 values doubled, as integers (code 8 is +0 here,
// not E2M1's -0: ggml's int8 table holds 0).
var kvaluesMXFP4 = [16]int{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// halfAt is the IEEE binary16 at b[0:2], widened exactly.
func halfAt(b []byte) float64 {
	return float64(float16.Frombits(binary.LittleEndian.Uint16(b)).Float32())
}

// ggmlScaleMinK4 is the 6-bit scale and min of sub-block s of a Q4_K / Q5_K block's 12 scale
// bytes b.
func ggmlScaleMinK4(b []byte, s int) (sc, m int) {
	if s < 4 {
		return int(b[s] & 63), int(b[s+4] & 63)
	}
	return int(b[s+4]&15) | int(b[s-4]>>6)<<4, int(b[s+4]>>4) | int(b[s]>>6)<<4
}

// ggmlQ3KScale is the 6-bit scale of sub-block s of a Q3_K block's 12 scale bytes b (before
// subtracting 32).
func ggmlQ3KScale(b []byte, s int) int {
	lo := int(b[s%8])
	if s >= 8 {
		lo >>= 4
	}
	return lo&15 | int(b[8+s%4]>>(2*(s/4))&3)<<4
}

// nib is element j (0..31) of a 32-element run stored as Q4_0's qs[16]: low nibbles first.
func nib(qs []byte, j int) int {
	if j < 16 {
		return int(qs[j] & 15)
	}
	return int(qs[j-16] >> 4)
}

// GGMLBlockValues returns the exact values of one block b of type t (BlockSize elements) in
// float64: ggml's dequantized value before its final float32 rounding.
func GGMLBlockValues(t op.GGMLType, b []byte) []float64 {
	out := make([]float64, t.BlockSize())
	switch t {
	case op.GGMLQ4_0:
		d := halfAt(b)
		for e := range out {
			out[e] = float64(nib(b[2:], e)-8) * d
		}
	case op.GGMLQ4_1:
		d, m := halfAt(b), halfAt(b[2:])
		for e := range out {
			out[e] = float64(nib(b[4:], e))*d + m
		}
	case op.GGMLQ5_0, op.GGMLQ5_1:
		d, m, off, qh, qs := halfAt(b), 0.0, 16, binary.LittleEndian.Uint32(b[2:]), b[6:]
		if t == op.GGMLQ5_1 {
			m, off, qh, qs = halfAt(b[2:]), 0, binary.LittleEndian.Uint32(b[4:]), b[8:]
		}
		for e := range out {
			q := nib(qs, e) | int(qh>>e&1)<<4
			out[e] = float64(q-off) * d
			if t == op.GGMLQ5_1 {
				out[e] += m // Q5_0 adds nothing: (q-16)*d keeps its -0
			}
		}
	case op.GGMLQ8_0:
		d := halfAt(b)
		for e := range out {
			out[e] = float64(int8(b[2+e])) * d
		}
	case op.GGMLQ2_K:
		d, dmin := halfAt(b[80:]), halfAt(b[82:])
		for e := range out {
			h, r := e/128, e%128
			j, l := r/32, r%32
			q := int(b[16+32*h+l] >> (2 * j) & 3)
			s := b[8*h+2*j+l/16]
			out[e] = d*float64(s&15)*float64(q) - dmin*float64(s>>4)
		}
	case op.GGMLQ3_K:
		d := halfAt(b[108:])
		for e := range out {
			h, r := e/128, e%128
			j, l := r/32, r%32
			q := int(b[32+32*h+l] >> (2 * j) & 3)
			if b[e%32]>>(e/32)&1 == 0 {
				q -= 4
			}
			sc := ggmlQ3KScale(b[96:108], 8*h+2*j+l/16) - 32
			out[e] = d * float64(sc) * float64(q)
		}
	case op.GGMLQ4_K, op.GGMLQ5_K:
		d, dmin, sb := halfAt(b), halfAt(b[2:]), b[4:16]
		qs := b[16:]
		if t == op.GGMLQ5_K {
			qs = b[48:]
		}
		for e := range out {
			c, r := e/64, e%64
			s := 2*c + r/32
			q := int(qs[32*c+r%32])
			if r < 32 {
				q &= 15
			} else {
				q >>= 4
			}
			if t == op.GGMLQ5_K {
				q |= int(b[16+e%32]>>s&1) << 4
			}
			sc, m := ggmlScaleMinK4(sb, s)
			out[e] = d*float64(sc)*float64(q) - dmin*float64(m)
		}
	case op.GGMLQ6_K:
		d := halfAt(b[208:])
		for e := range out {
			h, r := e/128, e%128
			k, l := r/32, r%32
			lo := int(b[64*h+l+32*(k%2)])
			if k >= 2 {
				lo >>= 4
			}
			q := lo&15 | int(b[128+32*h+l]>>(2*k)&3)<<4
			sc := int8(b[192+8*h+2*k+l/16])
			out[e] = d * float64(sc) * float64(q-32)
		}
	case op.GGMLIQ4_NL:
		d := halfAt(b)
		for e := range out {
			out[e] = d * float64(kvaluesIQ4NL[nib(b[2:], e)])
		}
	case op.GGMLIQ4_XS:
		d, sh := halfAt(b), binary.LittleEndian.Uint16(b[2:])
		for e := range out {
			s := e / 32
			ls := int(b[4+s/2]>>(4*(s%2))&15) | int(sh>>(2*s)&3)<<4
			out[e] = d * float64(ls-32) * float64(kvaluesIQ4NL[nib(b[8+16*s:], e%32)])
		}
	case op.GGMLMXFP4:
		scale := math.Ldexp(1, int(b[0])-128)
		for e := range out {
			out[e] = float64(kvaluesMXFP4[nib(b[1:], e)]) * scale
		}
	default:
		panic("GGMLBlockValues: " + t.String() + " is not a GGML block type")
	}
	return out
}

// DequantGGML returns the float32 values [N, K] of a GGML weight: each block's exact values
// (GGMLBlockValues) rounded once to float32, which is bitwise what ggml's dequantize_row_<type>
// computes (see above).
func DequantGGML(m *op.Matrix) []float32 {
	g := m.GG
	bs, ts := g.Type.BlockSize(), g.Type.TypeSize()
	w := make([]float32, m.N*m.K)
	for i := 0; i < m.N*m.K/bs; i++ {
		for e, v := range GGMLBlockValues(g.Type, g.Data[i*ts:(i+1)*ts]) {
			w[i*bs+e] = to32(v)
		}
	}
	return w
}
