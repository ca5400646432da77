package qdot

import (
	"fmt"
	"math"
	"slices"
)

// Affine is an MLX affine-quantized weight [N, K] (mlx.core.quantize, mode "affine"; the fields
// of op.Quant): row n holds K codes q of Bits bits packed least significant bit first into
// K*Bits/32 little-endian uint32 words, and element k is w = Scales[n, k/Group] * q +
// Biases[n, k/Group], scales and biases bfloat16 bits (F16: IEEE half bits).
type Affine struct {
	N, K, Bits, Group int
	Codes             []uint32 // [N, K*Bits/32]
	Scales, Biases    []uint16 // [N, K/Group]
	F16               bool
}

// FP8 is an FP8 E4M3 weight [N, K] with one scale per block of FP8Block x FP8Block (the layout of
// Hugging Face's fine-grained FP8 checkpoints: weight_scale_inv): W[n, k] = e4m3(Codes[n, k]) *
// ScaleInv[n/128, k/128]. E4M3 (OCP FP8) has a sign, 4 exponent bits of bias 7 and 3 mantissa
// bits, no infinities, and S.1111.111 as NaN; its values are integers times 2^-9, the largest
// 448 = 229376 * 2^-9. The scales are float32 (ScaleInv) or bfloat16 bits (ScaleInvBF16): set one.
type FP8 struct {
	N, K         int
	Codes        []uint8   // [N, K]
	ScaleInv     []float32 // [ceil(N/128), ceil(K/128)]
	ScaleInvBF16 []uint16  // the same, bfloat16
}

// FP8Block is the side of the blocks of an FP8 weight's scales.
const FP8Block = 128

// BF16 is a bfloat16 weight [N, K], row-major bits.
type BF16 struct {
	N, K int
	Bits []uint16
}

// AffineBits and AffineGroups are the bit widths and group sizes of MLX's affine mode.
var (
	AffineBits   = []int{2, 3, 4, 5, 6, 8}
	AffineGroups = []int{32, 64, 128}
)

// Validate checks the weight's sizes against its storage. Errors wrap ErrShape or ErrUnsupported.
func (w *Affine) Validate() error {
	if w == nil {
		return fmt.Errorf("%w: nil Affine weight", ErrShape)
	}
	if !slices.Contains(AffineBits, w.Bits) || !slices.Contains(AffineGroups, w.Group) {
		return fmt.Errorf("%w: %d-bit codes in groups of %d (want bits %v, groups %v)", ErrUnsupported, w.Bits, w.Group, AffineBits, AffineGroups)
	}
	if w.N <= 0 || w.K <= 0 || w.K%w.Group != 0 || w.N > math.MaxInt32 || w.K > math.MaxInt32 {
		return fmt.Errorf("%w: Affine weight [%d, %d] in groups of %d", ErrShape, w.N, w.K, w.Group)
	}
	if len(w.Codes) != w.N*(w.K*w.Bits/32) {
		return fmt.Errorf("%w: %d-bit weight [%d, %d] has %d code words, want %d", ErrShape, w.Bits, w.N, w.K, len(w.Codes), w.N*(w.K*w.Bits/32))
	}
	if g := w.N * (w.K / w.Group); len(w.Scales) != g || len(w.Biases) != g {
		return fmt.Errorf("%w: weight [%d, %d] in groups of %d has %d scales and %d biases, want %d", ErrShape, w.N, w.K, w.Group, len(w.Scales), len(w.Biases), g)
	}
	return nil
}

// Validate checks the weight's sizes against its storage. Errors wrap ErrShape.
func (w *FP8) Validate() error {
	if w == nil {
		return fmt.Errorf("%w: nil FP8 weight", ErrShape)
	}
	if w.N <= 0 || w.K <= 0 || w.N > math.MaxInt32 || w.K > math.MaxInt32 || len(w.Codes) != w.N*w.K {
		return fmt.Errorf("%w: FP8 weight [%d, %d] with %d codes", ErrShape, w.N, w.K, len(w.Codes))
	}
	nb := ceilDiv(w.N, FP8Block) * ceilDiv(w.K, FP8Block)
	if (w.ScaleInv == nil) == (w.ScaleInvBF16 == nil) || len(w.ScaleInv)+len(w.ScaleInvBF16) != nb {
		return fmt.Errorf("%w: FP8 weight [%d, %d] has %d float32 and %d bfloat16 scales, want %d of one kind ([%d, %d])",
			ErrShape, w.N, w.K, len(w.ScaleInv), len(w.ScaleInvBF16), nb, ceilDiv(w.N, FP8Block), ceilDiv(w.K, FP8Block))
	}
	return nil
}

// Validate checks the weight's sizes against its storage. Errors wrap ErrShape.
func (w *BF16) Validate() error {
	if w == nil {
		return fmt.Errorf("%w: nil BF16 weight", ErrShape)
	}
	if w.N <= 0 || w.K <= 0 || w.K%2 != 0 || w.N > math.MaxInt32 || w.K > math.MaxInt32 || len(w.Bits) != w.N*w.K {
		return fmt.Errorf("%w: BF16 weight [%d, %d] (K even) with %d values", ErrShape, w.N, w.K, len(w.Bits))
	}
	return nil
}

// scaleInv is the scale of FP8 block (nb, kb).
func (w *FP8) scaleInv(nb, kb int) float32 {
	i := nb*ceilDiv(w.K, FP8Block) + kb
	if w.ScaleInv != nil {
		return w.ScaleInv[i]
	}
	return math.Float32frombits(uint32(w.ScaleInvBF16[i]) << 16)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// e4m3Int is the E4M3 value of each code times 2^9, an integer (|v| <= 229376), and e4m3NaN
// marks the two NaN codes.
var e4m3Int, e4m3NaN = func() (v [256]int32, nan [256]bool) {
	for c := range 256 {
		e, m := c>>3&15, int32(c&7)
		switch {
		case e == 15 && m == 7:
			nan[c] = true
		case e == 0:
			v[c] = m
		default:
			v[c] = (8 + m) << (e - 1)
		}
		if c&0x80 != 0 {
			v[c] = -v[c]
		}
	}
	return
}()

// E4M3 returns the value of an E4M3 code (NaN for the NaN codes).
func E4M3(code uint8) float32 {
	if e4m3NaN[code] {
		return float32(math.NaN())
	}
	return float32(math.Ldexp(float64(e4m3Int[code]), -9))
}

// e4m3BF16 is each E4M3 code as bfloat16 bits: exact (E4M3's 3 mantissa bits and exponents
// 2^-9 to 2^8 fit bfloat16's, its subnormals becoming normal bfloat16 values).
var e4m3BF16 = func() (t [256]uint16) {
	for c := range 256 {
		t[c] = uint16(math.Float32bits(E4M3(uint8(c))) >> 16)
	}
	return
}()

// widen16 converts one 16-bit scale (bfloat16, or IEEE half when f16) to float32, exactly.
func widen16(b uint16, f16 bool) float32 {
	if !f16 {
		return math.Float32frombits(uint32(b) << 16)
	}
	sign := uint32(b>>15) << 31
	exp := uint32(b>>10) & 0x1f
	man := uint32(b) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	}
	v := float32(man) * (1.0 / (1 << 24)) // subnormal half, exact
	if sign != 0 {
		v = -v
	}
	return v
}

// affineCode is code k of row n of w.
func (w *Affine) affineCode(n, k int) int32 {
	wpr := w.K * w.Bits / 32
	bit := k * w.Bits
	row := w.Codes[n*wpr : (n+1)*wpr]
	v := uint64(row[bit/32])
	if bit/32+1 < wpr {
		v |= uint64(row[bit/32+1]) << 32
	}
	return int32(v >> (bit % 32) & (1<<w.Bits - 1))
}

// affineRow writes row n's codes into q (len K, natural order).
func (w *Affine) affineRow(n int, q []int32) {
	wpr := w.K * w.Bits / 32
	row := w.Codes[n*wpr : (n+1)*wpr]
	switch w.Bits {
	case 8:
		for j, x := range row {
			q[4*j], q[4*j+1], q[4*j+2], q[4*j+3] = int32(x&0xff), int32(x>>8&0xff), int32(x>>16&0xff), int32(x>>24)
		}
	case 4:
		for j, x := range row {
			for i := range 8 {
				q[8*j+i] = int32(x >> (4 * i) & 15)
			}
		}
	default:
		for k := range q[:w.K] {
			q[k] = w.affineCode(n, k)
		}
	}
}

// affineScales writes row n's group scales and biases as float32 into s and b (len K/Group).
func (w *Affine) affineScales(n int, s, b []float32) {
	gpr := w.K / w.Group
	for g := range gpr {
		s[g] = widen16(w.Scales[n*gpr+g], w.F16)
		b[g] = widen16(w.Biases[n*gpr+g], w.F16)
	}
}
