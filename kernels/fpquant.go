package kernels

import (
	"math"
	"unsafe"

	"github.com/stratakernels/strata/op"
)

// Decoding of the float-format weights (op.FP8Block, op.QFloat; op/weights_fp.go) inside the
// GEMM blocks, the row gathers of Embed and PLE, and widenF32 / rowF32: element = code * scale
// with the code decoded exactly to float32 (E4M3: the normal bit pattern rebuilt with the
// exponent rebased, subnormals as m * 2^-9; E2M1 from its eight magnitudes) and the scale
// widened exactly (BF16, F32, E8M0, or E4M3 for nvfp4), then one float32 multiply. Every kernel
// set (AVX-512F, AVX2, portable Go) computes that one product, so all of them give bitwise the
// values of optest.DequantFP8 / DequantQFloat (NaN codes decode to the quiet NaN 0x7fc00000
// with the code's sign; a NaN's payload after the multiply is the hardware's).
//
// FP8Block rows are decoded one at a time, each in runs of its 128-input blocks (the ragged
// last block of a row in a vector part of 16 inputs and a portable tail); QFloat rows are
// whole groups (K is a multiple of the group size), so a run of rows is one run of groups.

// e4m3Bits is the float32 bit pattern of E4M3 code b: sign | (e + 120) << 23 | m << 20 for a
// normal code (exponent e > 0), the exact float32 of m * 2^-9 for a subnormal one, the quiet NaN
// for 0x7f and 0xff.
func e4m3Bits(b uint8) uint32 {
	sign := uint32(b&0x80) << 24
	mag := uint32(b & 0x7f)
	switch {
	case mag == 0x7f:
		return sign | 0x7fc00000
	case mag < 8:
		return sign | math.Float32bits(float32(mag)*0x1p-9)
	}
	return sign | (mag<<20 + 120<<23)
}

// e4m3F32 and e2m1F32 are the decoded codes of the portable kernels.
var (
	e4m3F32 = func() (t [256]float32) {
		for i := range t {
			t[i] = math.Float32frombits(e4m3Bits(uint8(i)))
		}
		return t
	}()
	e2m1F32 = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, float32(math.Copysign(0, -1)), -0.5, -1, -1.5, -2, -3, -4, -6}
)

// e8m0F32 is the E8M0 scale s as a float32: 2^(s-127), the subnormal 2^-127 for s = 0 and +Inf
// for s = 255 (mlx's fp8_e8m0 conversion).
func e8m0F32(s uint8) float32 {
	if s == 0 {
		return math.Float32frombits(0x00400000)
	}
	return math.Float32frombits(uint32(s) << 23)
}

// useFPAsm reports whether the assembly decoding kernels run (amd64 with AVX2, the AVX-512F
// form when useAsm512 is also set); the tests turn useAsm and useAsm512 off as for QAffine.
func useFPAsm() bool { return useAsm && hasFPAsm }

// isPacked reports whether m's kernels decode it block by block (QAffine, FP8Block, QFloat,
// GGML) rather than widen 16-bit values.
func isPacked(m *op.Matrix) bool {
	return m.DType == op.QAffine || m.DType == op.FP8Block || m.DType == op.QFloat || m.DType == op.GGML
}

// packedScratch is the length of the float32 scratch unpackRows needs for rows of a packed m
// (additive in rows, so that a range of rows may be split over workers at offsets
// packedScratch(m, lo)): QAffine's scale-bias pairs, FP8Block's widened block scales per row,
// QFloat's widened group scales; none for GGML (its scales are decoded block by block).
func packedScratch(m *op.Matrix, rows int) int {
	switch m.DType {
	case op.QAffine:
		return quantScratch(m.Q, m.K, rows)
	case op.FP8Block:
		return rows * m.FP8.Grid[1]
	case op.QFloat:
		return rows * (m.K / m.QF.Mode.Group())
	}
	return 0
}

// unpackRows writes rows [r0, r1) of a packed weight m as float32 into dst (length
// (r1-r0)*K), with sb scratch of at least packedScratch(m, r1-r0).
func unpackRows(dst []float32, m *op.Matrix, r0, r1 int, sb []float32) {
	switch m.DType {
	case op.QAffine:
		dequantRows(dst, m.Q, m.K, r0, r1, sb)
	case op.FP8Block:
		fp8Rows(dst, m.FP8, m.K, r0, r1, sb)
	case op.QFloat:
		qfloatRows(dst, m.QF, m.K, r0, r1, sb)
	case op.GGML:
		ggmlRows(dst, m.GG, m.K, r0, r1)
	}
}

// fp8Rows decodes rows [r0, r1) of an FP8Block weight [N, K].
func fp8Rows(dst []float32, f *op.BlockFP8, K, r0, r1 int, sb []float32) {
	const B = op.FP8BlockSize
	cols := f.Grid[1]
	full, tail := K/B, K%B
	for r := r0; r < r1; r++ {
		s := sb[(r-r0)*cols : (r-r0+1)*cols]
		g0 := r / B * cols
		if f.ScaleDType == op.BF16 {
			for j := range s {
				s[j] = math.Float32frombits(uint32(f.Scales[g0+j]) << 16)
			}
		} else {
			copy(s, f.ScalesF32[g0:g0+cols])
		}
		codes := f.Codes[r*K : (r+1)*K]
		out := dst[(r-r0)*K : (r-r0+1)*K]
		e4m3Groups(out, codes, s, full, B)
		if tail > 0 {
			e4m3Groups(out[full*B:], codes[full*B:], s[full:], 1, tail)
		}
	}
}

// e4m3Groups writes dst[g*glen + i] = e4m3(codes[g*glen + i]) * scales[g] for groups groups of
// glen codes: the assembly kernels over runs of 16 (every group when glen is a multiple of 16;
// the first glen &^ 15 codes of a single group, a ragged FP8 block), the portable loop for the
// rest.
func e4m3Groups(dst []float32, codes []uint8, scales []float32, groups, glen int) {
	done := 0 // codes of each group decoded by the assembly kernels
	if useFPAsm() && groups > 0 && (glen%16 == 0 || groups == 1) {
		if done = glen &^ 15; done > 0 {
			if useAsm512 {
				e4m3Decode512(&dst[0], &codes[0], &scales[0], groups, done)
			} else {
				e4m3DecodeAVX2(&dst[0], &codes[0], &scales[0], groups, done)
			}
		}
	}
	if done == glen {
		return
	}
	for g := 0; g < groups; g++ {
		s := scales[g]
		out, in := dst[g*glen+done:(g+1)*glen], codes[g*glen+done:(g+1)*glen]
		for i, c := range in {
			out[i] = e4m3F32[c] * s
		}
	}
}

// wordBytes is the first byte of w in memory: mxfp8's codes are the bytes of its words in
// little-endian order, as the assembly kernels (amd64) read them.
func wordBytes(w []uint32) *uint8 { return (*uint8)(unsafe.Pointer(&w[0])) }

// qfloatRows decodes rows [r0, r1) of a QFloat weight [N, K].
func qfloatRows(dst []float32, q *op.QuantFloat, K, r0, r1 int, sb []float32) {
	bits, g := q.Mode.Bits(), q.Mode.Group()
	gpr := K / g
	groups := (r1 - r0) * gpr
	scales := q.Scales[r0*gpr : r1*gpr]
	sb = sb[:groups]
	if q.Mode == op.NVFP4 {
		for i, s := range scales {
			sb[i] = e4m3F32[s]
		}
	} else {
		for i, s := range scales {
			sb[i] = e8m0F32(s)
		}
	}
	words := K * bits / 32
	codes := q.Codes[r0*words : r1*words]
	dst = dst[:(r1-r0)*K]
	if useFPAsm() {
		switch {
		case bits == 8 && useAsm512:
			e4m3Decode512(&dst[0], wordBytes(codes), &sb[0], groups, g)
		case bits == 8:
			e4m3DecodeAVX2(&dst[0], wordBytes(codes), &sb[0], groups, g)
		case useAsm512:
			e2m1Decode512(&dst[0], &codes[0], &sb[0], groups, g)
		default:
			e2m1DecodeAVX2(&dst[0], &codes[0], &sb[0], groups, g)
		}
		return
	}
	for grp, s := range sb {
		out := dst[grp*g : (grp+1)*g]
		w := codes[grp*g*bits/32:]
		if bits == 8 {
			for i := range out {
				out[i] = e4m3F32[w[i/4]>>(8*(i%4))&0xff] * s
			}
			continue
		}
		for i := range out {
			out[i] = e2m1F32[w[i/8]>>(4*(i%8))&0xf] * s
		}
	}
}
