package kernels

import (
	"encoding/binary"
	"math"

	"github.com/stratakernels/strata/op"
)

// Decoding of GGML block weights (op.GGMLBlocks: the GGUF block types of op.GGMLBlockTypes, kept
// as the file stores them) inside the GEMM blocks, the row gathers of Embed and PLE, and
// widenF32 / rowF32. Each element is ggml's dequantize_row_<type> value (the layouts and the
// float32 arithmetic are in op/optest/ref_ggml.go): the block's half-precision scales widened
// exactly, its sub-block scale products (d * sc, dmin * m) exact in float32, the code times that
// scale exact too (Q6_K: rounded once), and the min subtracted with one rounding. So every
// element is bitwise optest.DequantGGML's value, and ggml's. Rows are whole blocks, so a run of
// rows is one run of blocks.

// ggmlKV is the IQ4_NL / IQ4_XS code table and ggmlMXFP4 MXFP4's (E2M1 doubled; code 8 is +0 as
// in ggml's table), as float32.
var (
	ggmlKV    = [16]float32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	ggmlMXFP4 = [16]float32{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
)

// e8m0Half is ggml's GGML_E8M0_TO_FP32_HALF: 2^(e-128) as a float32 (the subnormals 2^-128 and
// 2^-127 for e = 0, 1).
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// h16 is the half at b[0:2] widened (tab is f16Tab()).
func h16(tab []float32, b []byte) float32 { return tab[binary.LittleEndian.Uint16(b)] }

// ggmlRows decodes rows [r0, r1) of a GGML weight [N, K] into dst (length (r1-r0)*K).
func ggmlRows(dst []float32, g *op.GGMLBlocks, K, r0, r1 int) {
	bs, ts := g.Type.BlockSize(), g.Type.TypeSize()
	b0, b1 := r0*K/bs, r1*K/bs
	data := g.Data[b0*ts : b1*ts]
	dst = dst[:(b1-b0)*bs]
	tab := f16Tab()
	n := b1 - b0
	switch g.Type {
	case op.GGMLQ4_0:
		ggmlQ4_0(dst, data, n, tab)
	case op.GGMLQ4_1:
		ggmlQ4_1(dst, data, n, tab)
	case op.GGMLQ5_0:
		ggmlQ5_0(dst, data, n, tab)
	case op.GGMLQ5_1:
		ggmlQ5_1(dst, data, n, tab)
	case op.GGMLQ8_0:
		ggmlQ8_0(dst, data, n, tab)
	case op.GGMLQ2_K:
		ggmlQ2_K(dst, data, n, tab)
	case op.GGMLQ3_K:
		ggmlQ3_K(dst, data, n, tab)
	case op.GGMLQ4_K:
		ggmlQ4_K(dst, data, n, tab)
	case op.GGMLQ5_K:
		ggmlQ5_K(dst, data, n, tab)
	case op.GGMLQ6_K:
		ggmlQ6_K(dst, data, n, tab)
	case op.GGMLIQ4_NL:
		ggmlIQ4_NL(dst, data, n, tab)
	case op.GGMLIQ4_XS:
		ggmlIQ4_XS(dst, data, n, tab)
	case op.GGMLMXFP4:
		ggmlMXFP4Rows(dst, data, n)
	default:
		panic("kernels: GGML type " + g.Type.String() + " has no decoder (Validate admits only op.GGMLBlockTypes)")
	}
}

func ggmlQ4_0(dst []float32, data []byte, n int, tab []float32) {
	for i := range n {
		b, y := data[i*18:(i+1)*18], dst[i*32:(i+1)*32]
		d := h16(tab, b)
		for j, q := range b[2:18] {
			y[j] = float32(int(q&15)-8) * d
			y[j+16] = float32(int(q>>4)-8) * d
		}
	}
}

func ggmlQ4_1(dst []float32, data []byte, n int, tab []float32) {
	for i := range n {
		b, y := data[i*20:(i+1)*20], dst[i*32:(i+1)*32]
		d, m := h16(tab, b), h16(tab, b[2:])
		for j, q := range b[4:20] {
			y[j] = float32(q&15)*d + m
			y[j+16] = float32(q>>4)*d + m
		}
	}
}

func ggmlQ5_0(dst []float32, data []byte, n int, tab []float32) {
	for i := range n {
		b, y := data[i*22:(i+1)*22], dst[i*32:(i+1)*32]
		d, qh := h16(tab, b), binary.LittleEndian.Uint32(b[2:])
		for j, q := range b[6:22] {
			y[j] = float32(int(uint32(q&15)|(qh>>j&1)<<4)-16) * d
			y[j+16] = float32(int(uint32(q>>4)|(qh>>(j+16)&1)<<4)-16) * d
		}
	}
}

func ggmlQ5_1(dst []float32, data []byte, n int, tab []float32) {
	for i := range n {
		b, y := data[i*24:(i+1)*24], dst[i*32:(i+1)*32]
		d, m, qh := h16(tab, b), h16(tab, b[2:]), binary.LittleEndian.Uint32(b[4:])
		for j, q := range b[8:24] {
			y[j] = float32(uint32(q&15)|(qh>>j&1)<<4)*d + m
			y[j+16] = float32(uint32(q>>4)|(qh>>(j+16)&1)<<4)*d + m
		}
	}
}

func ggmlQ8_0(dst []float32, data []byte, n int, tab []float32) {
	for i := range n {
		b, y := data[i*34:(i+1)*34], dst[i*32:(i+1)*32]
		d := h16(tab, b)
		for j, q := range b[2:34] {
			y[j] = float32(int8(q)) * d
		}
	}
}

func ggmlQ2_K(dst []float32, data []byte, n int, tab []float32) {
	for i := range n {
		b, y := data[i*84:(i+1)*84], dst[i*256:(i+1)*256]
		d, dmin := h16(tab, b[80:]), h16(tab, b[82:])
		for h := range 2 {
			qs := b[16+32*h : 48+32*h]
			for j := range 4 {
				for half := range 2 {
					s := b[8*h+2*j+half]
					dl, ml := d*float32(s&15), dmin*float32(s>>4)
					out := y[128*h+32*j+16*half : 128*h+32*j+16*half+16]
					for l, q := range qs[16*half : 16*half+16] {
						out[l] = dl*float32(q>>(2*j)&3) - ml
					}
				}
			}
		}
	}
}

func ggmlQ3_K(dst []float32, data []byte, n int, tab []float32) {
	var dl [16]float32
	for i := range n {
		b, y := data[i*110:(i+1)*110], dst[i*256:(i+1)*256]
		d := h16(tab, b[108:])
		sc := b[96:108]
		for s := range 16 {
			lo := sc[s%8]
			if s >= 8 {
				lo >>= 4
			}
			dl[s] = d * float32(int(lo&15|(sc[8+s%4]>>(2*(s/4))&3)<<4)-32)
		}
		hm := b[:32]
		for h := range 2 {
			qs := b[32+32*h : 64+32*h]
			for j := range 4 {
				bit := uint(4*h + j)
				out := y[128*h+32*j : 128*h+32*j+32]
				for l, q := range qs {
					v := int(q>>(2*j)&3) - 4 + 4*int(hm[l]>>bit&1)
					out[l] = dl[8*h+2*j+l/16] * float32(v)
				}
			}
		}
	}
}

// scaleMinK4 is the 6-bit scale and min of sub-block s of a Q4_K / Q5_K block's scale bytes.
func scaleMinK4(b []byte, s int) (sc, m float32) {
	if s < 4 {
		return float32(b[s] & 63), float32(b[s+4] & 63)
	}
	return float32(b[s+4]&15 | b[s-4]>>6<<4), float32(b[s+4]>>4 | b[s]>>6<<4)
}

func ggmlQ4_K(dst []float32, data []byte, n int, tab []float32) {
	for i := range n {
		b, y := data[i*144:(i+1)*144], dst[i*256:(i+1)*256]
		d, dmin := h16(tab, b), h16(tab, b[2:])
		for c := range 4 {
			sc1, m1 := scaleMinK4(b[4:16], 2*c)
			sc2, m2 := scaleMinK4(b[4:16], 2*c+1)
			d1, o1, d2, o2 := d*sc1, dmin*m1, d*sc2, dmin*m2
			out := y[64*c : 64*c+64]
			for l, q := range b[16+32*c : 48+32*c] {
				out[l] = d1*float32(q&15) - o1
				out[l+32] = d2*float32(q>>4) - o2
			}
		}
	}
}

func ggmlQ5_K(dst []float32, data []byte, n int, tab []float32) {
	for i := range n {
		b, y := data[i*176:(i+1)*176], dst[i*256:(i+1)*256]
		d, dmin := h16(tab, b), h16(tab, b[2:])
		qh := b[16:48]
		for c := range 4 {
			sc1, m1 := scaleMinK4(b[4:16], 2*c)
			sc2, m2 := scaleMinK4(b[4:16], 2*c+1)
			d1, o1, d2, o2 := d*sc1, dmin*m1, d*sc2, dmin*m2
			out := y[64*c : 64*c+64]
			for l, q := range b[48+32*c : 80+32*c] {
				h := qh[l] >> (2 * c)
				out[l] = d1*float32(q&15|h&1<<4) - o1
				out[l+32] = d2*float32(q>>4|h&2<<3) - o2
			}
		}
	}
}

func ggmlQ6_K(dst []float32, data []byte, n int, tab []float32) {
	var ds [16]float32
	for i := range n {
		b, y := data[i*210:(i+1)*210], dst[i*256:(i+1)*256]
		d := h16(tab, b[208:])
		for s := range 16 {
			ds[s] = d * float32(int8(b[192+s]))
		}
		for h := range 2 {
			ql, qh := b[64*h:64*h+64], b[128+32*h:160+32*h]
			out := y[128*h : 128*h+128]
			for l := range 32 {
				s := 8*h + l/16
				a, c, e := ql[l], ql[l+32], qh[l]
				out[l] = ds[s] * float32(int(a&15|e&3<<4)-32)
				out[l+32] = ds[s+2] * float32(int(c&15|e>>2&3<<4)-32)
				out[l+64] = ds[s+4] * float32(int(a>>4|e>>4&3<<4)-32)
				out[l+96] = ds[s+6] * float32(int(c>>4|e>>6<<4)-32)
			}
		}
	}
}

func ggmlIQ4_NL(dst []float32, data []byte, n int, tab []float32) {
	for i := range n {
		b, y := data[i*18:(i+1)*18], dst[i*32:(i+1)*32]
		d := h16(tab, b)
		for j, q := range b[2:18] {
			y[j] = d * ggmlKV[q&15]
			y[j+16] = d * ggmlKV[q>>4]
		}
	}
}

func ggmlIQ4_XS(dst []float32, data []byte, n int, tab []float32) {
	for i := range n {
		b, y := data[i*136:(i+1)*136], dst[i*256:(i+1)*256]
		d, sh := h16(tab, b), binary.LittleEndian.Uint16(b[2:])
		for s := range 8 {
			ls := int(b[4+s/2]>>(4*(s%2))&15) | int(sh>>(2*s)&3)<<4
			dl := d * float32(ls-32)
			out := y[32*s : 32*s+32]
			for j, q := range b[8+16*s : 24+16*s] {
				out[j] = dl * ggmlKV[q&15]
				out[j+16] = dl * ggmlKV[q>>4]
			}
		}
	}
}

func ggmlMXFP4Rows(dst []float32, data []byte, n int) {
	for i := range n {
		b, y := data[i*17:(i+1)*17], dst[i*32:(i+1)*32]
		d := e8m0Half(b[0])
		for j, q := range b[1:17] {
			y[j] = ggmlMXFP4[q&15] * d
			y[j+16] = ggmlMXFP4[q>>4] * d
		}
	}
}
