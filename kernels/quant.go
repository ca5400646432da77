package kernels

import (
	"fmt"
	"math"

	"github.com/stratakernels/strata/op"
)

// Dequantization of MLX affine-quantized weights (op.QAffine, docs/FORMATS.md section 2): element i of
// row n is w = scale * q + bias with q the i-th Bits-bit code of the row's little-endian bit
// stream and (scale, bias) those of its group. Every kernel set evaluates it as one fused
// multiply-add rounded once to float32 (the assembly kernels with vfmadd, the portable one in
// float64, where scale * q is exact and the sum rounds to the same float32), so all of them give
// bitwise the values of optest.Dequant.
//
// Groups hold 32, 64 or 128 elements, so a row is a whole number of 32-element chunks and a
// chunk of Bits-bit codes is exactly Bits words: the kernels work chunk by chunk, and because K
// is a multiple of the group size every row starts on a group boundary, so a run of rows is
// one run of groups (codes, scales and biases of consecutive rows are contiguous).

// qTable drives the assembly chunk kernels for one bit width: element i of a 32-element chunk
// is (word[lo[i]] >> shr[i] | word[hi[i]] << shl[i]) & mask, reading the chunk's Bits words
// (loaded under the lane mask load) through a lane permutation. A count of 32 in shl shifts
// the high word out entirely (the element does not straddle a word boundary). The layout is
// read by quant_amd64.s: lo at 0, hi at 128, shr at 256, shl at 384, load at 512, mask at 576.
type qTable struct {
	lo, hi, shr, shl [32]uint32
	load             [16]int32
	mask             uint32
	_                [15]uint32
}

// qTables holds the tables of bit widths 0..8 (entries of widths MLX does not use stay zero).
var qTables = func() (t [9]qTable) {
	for _, b := range op.QuantBits {
		q := &t[b]
		for i := 0; i < 32; i++ {
			bit := i * b
			q.lo[i] = uint32(bit / 32)
			q.hi[i] = uint32(min(bit/32+1, 7))
			q.shr[i] = uint32(bit % 32)
			q.shl[i] = uint32(32 - bit%32)
		}
		for l := 0; l < b; l++ {
			q.load[l] = -1
		}
		q.mask = 1<<b - 1
	}
	return t
}()

// useQuantAsm reports whether the assembly dequantization kernels run (amd64 with AVX2 and
// FMA; the AVX-512F form when useAsm512 is also set). The tests turn useAsm and useAsm512 off to
// run the other kernel sets on the same machine.
func useQuantAsm() bool { return useAsm && hasQuantAsm }

// QuantKernel names the kernels that dequantize QAffine weights inside the GEMM blocks:
// "avx512 asm", "avx2-fma asm" or "generic Go".
func QuantKernel() string {
	if useQuantAsm() {
		if useAsm512 {
			return cpuAsm512Name
		}
		return cpuAsmName
	}
	return "generic Go"
}

// dequantRows writes rows [r0, r1) of a QAffine weight [N, K] as float32 into dst (length
// (r1-r0)*K), widening each group's scale and bias into sb (length at least 2*(r1-r0)*K/Group)
// first.
func dequantRows(dst []float32, q *op.Quant, K, r0, r1 int, sb []float32) {
	rows := r1 - r0
	if rows <= 0 {
		return
	}
	gpr := K / q.Group
	words := K * q.Bits / 32
	g0, groups := r0*gpr, rows*gpr
	sb = sb[:2*groups]
	scales, biases := q.Scales[g0:g0+groups], q.Biases[g0:g0+groups]
	if q.ScaleDType == op.BF16 {
		for g := range scales {
			sb[2*g] = math.Float32frombits(uint32(scales[g]) << 16)
			sb[2*g+1] = math.Float32frombits(uint32(biases[g]) << 16)
		}
	} else {
		tab := f16Tab()
		for g := range scales {
			sb[2*g], sb[2*g+1] = tab[scales[g]], tab[biases[g]]
		}
	}
	codes := q.Codes[r0*words : r1*words]
	dst = dst[:rows*K]
	chunks := q.Group / 32
	if useQuantAsm() {
		if useAsm512 {
			qDequant512(&dst[0], &codes[0], &sb[0], groups, chunks, q.Bits, &qTables[q.Bits])
		} else {
			qDequantAVX2(&dst[0], &codes[0], &sb[0], groups, chunks, q.Bits, &qTables[q.Bits])
		}
		return
	}
	dequantGo(dst, codes, sb, groups, chunks, q.Bits)
}

// dequantGo is the portable chunk kernel: groups runs of chunks 32-element chunks, each from
// bits words of codes, with the scale and bias pairs of sb.
func dequantGo(dst []float32, codes []uint32, sb []float32, groups, chunks, bits int) {
	mask := uint64(1)<<bits - 1
	for g := 0; g < groups; g++ {
		s, b := float64(sb[2*g]), float64(sb[2*g+1])
		for c := 0; c < chunks; c++ {
			w := codes[:bits:bits]
			codes = codes[bits:]
			out := dst[:32:32]
			dst = dst[32:]
			switch bits {
			case 8:
				for i := range out {
					out[i] = float32(s*float64(w[i/4]>>(8*(i%4))&0xff) + b)
				}
			case 4:
				for i := range out {
					out[i] = float32(s*float64(w[i/8]>>(4*(i%8))&0xf) + b)
				}
			case 2:
				for i := range out {
					out[i] = float32(s*float64(w[i/16]>>(2*(i%16))&0x3) + b)
				}
			default: // 3, 5, 6: codes straddle words
				var acc uint64 // bits not consumed yet, lowest first
				have, next := 0, 0
				for i := range out {
					if have < bits {
						acc |= uint64(w[next]) << have
						next++
						have += 32
					}
					out[i] = float32(s*float64(acc&mask) + b)
					acc >>= bits
					have -= bits
				}
			}
		}
	}
}

// f16Tab is the table of all 65536 half-precision values widened (shared with widenU16).
func f16Tab() []float32 {
	f16TableOnce.Do(func() {
		f16Table = make([]float32, 1<<16)
		for i := range f16Table {
			f16Table[i] = f16ToF32(uint16(i))
		}
	})
	return f16Table[:1<<16]
}

// quantScratch is the length of the scale-bias buffer dequantRows needs for rows of K.
func quantScratch(q *op.Quant, K, rows int) int { return 2 * rows * (K / q.Group) }

// dequantF32 returns the float32 values [N, K] of a QAffine weight (scale * q + bias per group,
// docs/FORMATS.md section 2), an FP8Block or a QFloat one (code * scale, fpquant.go) or a GGML
// one (ggml's block values, ggml.go), computed
// by the kernels MatMul uses. It is for tests and tools: the ops never dequantize a whole model.
// Errors wrap op.ErrShape, op.ErrDType, op.ErrUnsupported or op.ErrInvalidArgument (m.Validate),
// or op.ErrDType when m is not of a packed format.
func dequantF32(m *op.Matrix) ([]float32, error) {
	if err := m.Validate("DequantF32"); err != nil {
		return nil, err
	}
	if !isPacked(m) {
		return nil, fmt.Errorf("DequantF32: %w: %v weight (want QAffine, FP8Block, QFloat or GGML)", op.ErrDType, m.DType)
	}
	out := make([]float32, m.N*m.K)
	parallelFor(m.N, 64, func(lo, hi int) {
		unpackRows(out[lo*m.K:hi*m.K], m, lo, hi, make([]float32, packedScratch(m, hi-lo)))
	})
	return out, nil
}
