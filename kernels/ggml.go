package kernels

import (
	"encoding/binary"
	"math"

	"github.com/stratakernels/strata/op"
)

// Decoding of GGML block weights (op.GGMLBlocks: the GGUF block types of op.GGMLBlockTypes, kept
// as the file stores them) inside the GEMM blocks, the row gathers of Embed and PLE, and
// widenF32 / rowF32, to ggml's dequantize_row_<type> values (the layouts and ggml's float32
// arithmetic are in op/optest/ref_ggml.go).
//
// Every type is decoded in two steps. ggmlCodes turns a run of blocks into one signed 8-bit
// code per element and, per run of 16 elements, a float32 scale s and offset o, such that ggml's
// value is float32(code) * s + o: the codes are the type's integers (Q4_0's q - 8, Q5_0's
// q - 16, Q3_K's q - 4 or q, Q6_K's q - 32, the IQ4 and MXFP4 table values), s the block scale
// times the sub-block scale (exact in float32: at most 11 + 8 significant bits), o Q4_1 and
// Q5_1's m, minus the sub-block min of the K-quants (exact too: dmin * m) or, for the types
// without either, -0 (adding -0 changes no value, a -0 product included). Nibbles and bit planes
// are unpacked eight at a time in 64-bit words; the codes of Q4_0, Q4_1, Q4_K, Q5_K and Q6_K,
// and the table codes of IQ4_NL, IQ4_XS and MXFP4 (VPSHUFB), 32 at a time by AVX2 where the CPU
// has it. ggmlApply then computes float32(code) * s + o: the product is exact but for Q6_K,
// where it is ggml's one rounding, and the addition is ggml's one rounding of the min (a fused
// multiply-add gives the same bits, the product being exact where an offset is not -0), so every
// element is bitwise optest.DequantGGML's value. ggmlApply runs in AVX-512F or AVX2 where the
// CPU has them (ggml_amd64.s), else in portable Go; all give the same bits.

// ggmlRun is the number of elements that share one scale and offset in ggmlCodes's output.
const ggmlRun = 16

// ggmlChunk is the number of elements ggmlRows decodes per ggmlCodes call (a multiple of 256).
const ggmlChunk = 4096

// SWAR constants: a byte of 0x0f, 0x03, 0x01 and 0x80 in each of 8 lanes.
const (
	lanes0f = 0x0f0f0f0f0f0f0f0f
	lanes03 = 0x0303030303030303
	lanes01 = 0x0101010101010101
	lanes80 = 0x8080808080808080
)

// subLanes subtracts k from each byte of x (each byte at most 127, k at most 128), giving the
// two's complement bytes of the signed differences.
func subLanes(x uint64, k uint64) uint64 { return ((x | lanes80) - k*lanes01) ^ lanes80 }

// ggmlKV is the IQ4_NL / IQ4_XS code table and ggmlMXFP4 MXFP4's (E2M1 doubled; code 8 is +0 as
// in ggml's int8 table).
var (
	ggmlKV    = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	ggmlMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
)

// spread4[b] has bit i of b at bit 4 of byte i (the fifth bits of Q5_0 / Q5_1).
var spread4 = func() (t [256]uint64) {
	for b := range t {
		for i := range 8 {
			t[b] |= uint64(b>>i&1) << (8*i + 4)
		}
	}
	return
}()

// negZero is -0 as a float32: the offset of the types without a min.
var negZero = float32(math.Copysign(0, -1))

// e8m0Half is ggml's GGML_E8M0_TO_FP32_HALF: 2^(e-128) as a float32 (the subnormals 2^-128 and
// 2^-127 for e = 0, 1).
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

func put64(c []byte, v uint64) { binary.LittleEndian.PutUint64(c, v) }

// GGMLKernel names the kernels that decode GGML weights inside the GEMM blocks: with the
// assembly, codes unpacked by AVX2 (Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4) or in Go
// 64-bit words (the other types) and scaled by AVX-512F or AVX2 ("avx2/Go unpacking, avx512
// scaling"); else "generic Go".
func GGMLKernel() string {
	switch {
	case useFPAsm() && useAsm512:
		return "avx2/Go unpacking, avx512 scaling"
	case useFPAsm():
		return "avx2/Go unpacking, avx2 scaling"
	}
	return "generic Go"
}

// ggmlRows decodes rows [r0, r1) of a GGML weight [N, K] into dst (length (r1-r0)*K).
func ggmlRows(dst []float32, g *op.GGMLBlocks, K, r0, r1 int) {
	bs, ts := g.Type.BlockSize(), g.Type.TypeSize()
	b0, b1 := r0*K/bs, r1*K/bs
	var c [ggmlChunk]byte
	var s, o [ggmlChunk / ggmlRun]float32
	per := ggmlChunk / bs
	for b := b0; b < b1; b += per {
		n := min(per, b1-b)
		ggmlCodes(g.Type, g.Data[b*ts:(b+n)*ts], n, c[:n*bs], s[:], o[:])
		ggmlApply(dst[(b-b0)*bs:(b-b0+n)*bs], c[:n*bs], s[:n*bs/ggmlRun], o[:n*bs/ggmlRun])
	}
}

// ggmlApply writes dst[i] = float32(int8(c[i])) * s[i/16] + o[i/16] for len(s) runs of 16.
func ggmlApply(dst []float32, c []byte, s, o []float32) {
	runs := len(s)
	if runs == 0 {
		return
	}
	if useFPAsm() {
		if useAsm512 {
			ggmlApply512(&dst[0], &c[0], &s[0], &o[0], runs)
		} else {
			ggmlApplyAVX2(&dst[0], &c[0], &s[0], &o[0], runs)
		}
		return
	}
	c, dst = c[:runs*ggmlRun], dst[:runs*ggmlRun]
	for r := range runs {
		sc, off := s[r], o[r]
		out := dst[r*ggmlRun : (r+1)*ggmlRun]
		for i, v := range c[r*ggmlRun : (r+1)*ggmlRun] {
			out[i] = float32(int8(v))*sc + off
		}
	}
}

// ggmlCodes writes the codes of the n blocks of type t in data into c (one byte per element, a
// signed code) and each run of 16 elements' scale and offset into s and o (ggmlRows describes
// them). s and o must hold n * BlockSize / 16 values.
func ggmlCodes(t op.GGMLType, data []byte, n int, c []byte, s, o []float32) {
	tab := f16Tab()
	h16 := func(b []byte) float32 { return tab[binary.LittleEndian.Uint16(b)] }
	switch t {
	case op.GGMLQ4_0, op.GGMLQ4_1:
		ts, q, kv := 18, 2, &nibbleMinus8
		if t == op.GGMLQ4_1 {
			ts, q, kv = 20, 4, &nibbleSame
		}
		nibbleTable(c, data[q:], ts, kv, n)
		for i := range n {
			b := data[i*ts : (i+1)*ts]
			d, off := h16(b), negZero
			if t == op.GGMLQ4_1 {
				off = h16(b[2:])
			}
			s[2*i], s[2*i+1], o[2*i], o[2*i+1] = d, d, off, off
		}
	case op.GGMLQ5_0, op.GGMLQ5_1:
		ts, hq := 22, 2
		if t == op.GGMLQ5_1 {
			ts, hq = 24, 4
		}
		for i := range n {
			b, cc := data[i*ts:(i+1)*ts], c[32*i:32*i+32]
			qh := binary.LittleEndian.Uint32(b[hq:])
			w0, w1 := le64(b[hq+4:]), le64(b[hq+12:])
			v := [4]uint64{w0&lanes0f | spread4[qh&0xff], w1&lanes0f | spread4[qh>>8&0xff],
				w0>>4&lanes0f | spread4[qh>>16&0xff], w1>>4&lanes0f | spread4[qh>>24]}
			d, off := h16(b), negZero
			if t == op.GGMLQ5_1 {
				off = h16(b[2:])
			}
			for k, x := range v {
				if t == op.GGMLQ5_0 {
					x = subLanes(x, 16)
				}
				put64(cc[8*k:], x)
			}
			s[2*i], s[2*i+1], o[2*i], o[2*i+1] = d, d, off, off
		}
	case op.GGMLQ8_0:
		for i := range n {
			b := data[i*34 : (i+1)*34]
			copy(c[32*i:32*i+32], b[2:34])
			d := h16(b)
			s[2*i], s[2*i+1], o[2*i], o[2*i+1] = d, d, negZero, negZero
		}
	case op.GGMLQ2_K:
		for i := range n {
			b, cc := data[i*84:(i+1)*84], c[256*i:256*i+256]
			d, dmin := h16(b[80:]), h16(b[82:])
			for h := range 2 {
				for j := range 4 {
					for l := 0; l < 32; l += 8 {
						put64(cc[128*h+32*j+l:], le64(b[16+32*h+l:])>>(2*j)&lanes03)
					}
				}
			}
			for g := range 16 {
				sc := b[g]
				s[16*i+g], o[16*i+g] = d*float32(sc&15), -(dmin * float32(sc>>4))
			}
		}
	case op.GGMLQ3_K:
		for i := range n {
			b, cc := data[i*110:(i+1)*110], c[256*i:256*i+256]
			d := h16(b[108:])
			for h := range 2 {
				for j := range 4 {
					bit := uint(4*h + j)
					for l := 0; l < 32; l += 8 {
						x := le64(b[32+32*h+l:])>>(2*j)&lanes03 | (le64(b[l:])>>bit&lanes01)<<2
						put64(cc[128*h+32*j+l:], subLanes(x, 4))
					}
				}
			}
			sc := b[96:108]
			for g := range 16 {
				lo := sc[g%8]
				if g >= 8 {
					lo >>= 4
				}
				s[16*i+g], o[16*i+g] = d*float32(int(lo&15|(sc[8+g%4]>>(2*(g/4))&3)<<4)-32), negZero
			}
		}
	case op.GGMLQ4_K, op.GGMLQ5_K:
		ts, q := 144, 16
		if t == op.GGMLQ5_K {
			ts, q = 176, 48
		}
		for i := range n {
			b, cc := data[i*ts:(i+1)*ts], c[256*i:256*i+256]
			d, dmin := h16(b), h16(b[2:])
			if t == op.GGMLQ4_K {
				nibble32(cc, b[q:], 4)
			} else {
				q5KCodes(cc, b)
			}
			for sb := range 8 {
				sc, m := scaleMinK4(b[4:16], sb)
				ds, dm := d*sc, -(dmin * m)
				s[16*i+2*sb], s[16*i+2*sb+1], o[16*i+2*sb], o[16*i+2*sb+1] = ds, ds, dm, dm
			}
		}
	case op.GGMLQ6_K:
		for i := range n {
			b, cc := data[i*210:(i+1)*210], c[256*i:256*i+256]
			q6Codes(cc, b)
			d := h16(b[208:])
			for g := range 16 {
				s[16*i+g], o[16*i+g] = d*float32(int8(b[192+g])), negZero
			}
		}
	case op.GGMLIQ4_NL, op.GGMLMXFP4:
		ts, q, kv := 18, 2, &ggmlKV
		if t == op.GGMLMXFP4 {
			ts, q, kv = 17, 1, &ggmlMXFP4
		}
		nibbleTable(c, data[q:], ts, kv, n)
		for i := range n {
			b := data[i*ts : (i+1)*ts]
			var d float32
			if t == op.GGMLMXFP4 {
				d = e8m0Half(b[0])
			} else {
				d = h16(b)
			}
			s[2*i], s[2*i+1], o[2*i], o[2*i+1] = d, d, negZero, negZero
		}
	case op.GGMLIQ4_XS:
		for i := range n {
			b, cc := data[i*136:(i+1)*136], c[256*i:256*i+256]
			d, sh := h16(b), binary.LittleEndian.Uint16(b[2:])
			nibbleTable(cc, b[8:], 16, &ggmlKV, 8)
			for sb := range 8 {
				ls := int(b[4+sb/2]>>(4*(sb%2))&15) | int(sh>>(2*sb)&3)<<4
				dl := d * float32(ls-32)
				s[16*i+2*sb], s[16*i+2*sb+1], o[16*i+2*sb], o[16*i+2*sb+1] = dl, dl, negZero, negZero
			}
		}
	default:
		panic("kernels: GGML type " + t.String() + " has no decoder (Validate admits only op.GGMLBlockTypes)")
	}
}

// nibbleTable writes, for i < n, the 32 codes of the 16 bytes at src[i*stride:]: c[32i + j] =
// kv[low nibble of byte j], c[32i + 16 + j] = kv[its high nibble] (IQ4_NL, IQ4_XS and MXFP4's
// tables), by VPSHUFB where the CPU has AVX2 (ggml_amd64.s), else in portable Go.
func nibbleTable(c []byte, src []byte, stride int, kv *[16]int8, n int) {
	if n == 0 {
		return
	}
	_ = src[(n-1)*stride+15]
	_ = c[32*n-1]
	if useFPAsm() {
		nibbleTableAVX2(&c[0], &src[0], stride, kv, n)
		return
	}
	for i := range n {
		out := c[32*i : 32*i+32]
		for j, x := range src[i*stride : i*stride+16] {
			out[j], out[j+16] = byte(kv[x&15]), byte(kv[x>>4])
		}
	}
}

// nibbleMinus8 and nibbleSame are the code tables of Q4_0 (q - 8) and Q4_1 (q).
var (
	nibbleMinus8 = [16]int8{-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}
	nibbleSame   = [16]int8{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
)

// nibble32 writes, for i < n, the 64 nibbles of the 32 bytes at src[32i:] (Q4_K's layout):
// c[64i + j] = low nibble of byte j, c[64i + 32 + j] = its high nibble; AVX2 where the CPU has
// it (ggml_amd64.s), else 64-bit words.
func nibble32(c []byte, src []byte, n int) {
	if n == 0 {
		return
	}
	_ = src[32*n-1]
	_ = c[64*n-1]
	if useFPAsm() {
		nibble32AVX2(&c[0], &src[0], n)
		return
	}
	for i := range n {
		for l := 0; l < 32; l += 8 {
			w := le64(src[32*i+l:])
			put64(c[64*i+l:], w&lanes0f)
			put64(c[64*i+32+l:], w>>4&lanes0f)
		}
	}
}

// q5KCodes writes the 256 codes of the Q5_K block b into c (each nibble with its fifth bit from
// qh): AVX2 where the CPU has it (ggml_amd64.s), else 64-bit words.
func q5KCodes(c []byte, b []byte) {
	_, _ = c[255], b[175]
	if useFPAsm() {
		q5KCodesAVX2(&c[0], &b[0])
		return
	}
	for k := range 4 {
		for l := 0; l < 32; l += 8 {
			w, h := le64(b[48+32*k+l:]), le64(b[16+l:])>>(2*k)
			put64(c[64*k+l:], w&lanes0f|(h&lanes01)<<4)
			put64(c[64*k+32+l:], w>>4&lanes0f|(h>>1&lanes01)<<4)
		}
	}
}

// q6Codes writes the 256 codes q - 32 of the Q6_K block b into c: AVX2 where the CPU has it
// (ggml_amd64.s), else 64-bit words.
func q6Codes(c []byte, b []byte) {
	_, _ = c[255], b[191]
	if useFPAsm() {
		q6CodesAVX2(&c[0], &b[0])
		return
	}
	for h := range 2 {
		for l := 0; l < 32; l += 8 {
			a, q, e := le64(b[64*h+l:]), le64(b[64*h+32+l:]), le64(b[128+32*h+l:])
			put64(c[128*h+l:], subLanes(a&lanes0f|(e&lanes03)<<4, 32))
			put64(c[128*h+32+l:], subLanes(q&lanes0f|(e>>2&lanes03)<<4, 32))
			put64(c[128*h+64+l:], subLanes(a>>4&lanes0f|(e>>4&lanes03)<<4, 32))
			put64(c[128*h+96+l:], subLanes(q>>4&lanes0f|(e>>6&lanes03)<<4, 32))
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
