package optest

import (
	"math"

	"github.com/stratakernels/strata/op"
)

// float64 references of the 8-bit and 4-bit float weight formats (op.FP8Block, op.QFloat),
// decoded from the bit fields of their definitions (op/weights_fp.go; OCP 8-bit and 4-bit
// floats, mlx's fp4.h / fp8.h), sharing no table or bit trick with any backend.

// E4M3 is the value of the E4M3 (float8_e4m3fn) bit pattern b: sign bit 7, exponent bits 6..3
// (bias 7), mantissa bits 2..0; subnormal when the exponent is 0; NaN for 0x7f and 0xff (no
// infinities).
func E4M3(b uint8) float64 {
	sign := 1.0
	if b&0x80 != 0 {
		sign = -1
	}
	e, m := int(b>>3&0xf), float64(b&7)
	switch {
	case e == 0xf && m == 7:
		return math.NaN()
	case e == 0:
		return sign * m / 8 * math.Ldexp(1, 1-7)
	}
	return sign * (1 + m/8) * math.Ldexp(1, e-7)
}

// E2M1 is the value of the 4-bit float code c (low 4 bits): sign bit 3, exponent bits 2..1
// (bias 1), mantissa bit 0, subnormal when the exponent is 0.
func E2M1(c uint8) float64 {
	sign := 1.0
	if c&8 != 0 {
		sign = -1
	}
	e, m := int(c>>1&3), float64(c&1)
	if e == 0 {
		return sign * m / 2
	}
	return sign * (1 + m/2) * math.Ldexp(1, e-1)
}

// E8M0 is the value of the exponent-only scale s as a float32 holds it: 2^(s-127), +Inf for 255
// (2^128 overflows float32: mlx's conversion gives +Inf, so a code times it is +-Inf or NaN).
func E8M0(s uint8) float64 {
	if s == 255 {
		return math.Inf(1)
	}
	return math.Ldexp(1, int(s)-127)
}

// e4m3Table and e2m1Table are E4M3 and E2M1 of every code.
var (
	e4m3Table = func() (t [256]float64) {
		for i := range t {
			t[i] = E4M3(uint8(i))
		}
		return t
	}()
	e2m1Table = func() (t [16]float64) {
		for i := range t {
			t[i] = E2M1(uint8(i))
		}
		return t
	}()
)

// to32 rounds a float64 to float32 to nearest even, overflowing to infinity (float32(v) is
// implementation-defined out of range).
func to32(v float64) float32 {
	const inf = math.MaxFloat32 + 0x1p103 // MaxFloat32 plus half its ulp: rounds up to Inf
	switch {
	case v >= inf:
		return float32(math.Inf(1))
	case v <= -inf:
		return float32(math.Inf(-1))
	}
	return float32(v)
}

// streamCode is code i of bits bits of a row's little-endian bit stream (bit b of the code is
// bit (i*bits + b) % 32 of word (i*bits + b) / 32), read bit by bit.
func streamCode(row []uint32, i, bits int) uint32 {
	var c uint32
	for b := 0; b < bits; b++ {
		bit := i*bits + b
		c |= (row[bit/32] >> (bit % 32) & 1) << b
	}
	return c
}

// DequantFP8 returns the float32 values [N, K] of an FP8Block weight: E4M3(code) times the
// scale of its 128 x 128 block (BF16 widened, or F32), in float64 and rounded once.
func DequantFP8(m *op.Matrix) []float32 {
	f := m.FP8
	cols := (m.K + op.FP8BlockSize - 1) / op.FP8BlockSize
	scale := func(i, j int) float64 {
		g := i/op.FP8BlockSize*cols + j/op.FP8BlockSize
		if f.ScaleDType == op.BF16 {
			return float64(math.Float32frombits(uint32(f.Scales[g]) << 16))
		}
		return float64(f.ScalesF32[g])
	}
	w := make([]float32, m.N*m.K)
	for i := 0; i < m.N; i++ {
		for j := 0; j < m.K; j++ {
			w[i*m.K+j] = to32(e4m3Table[f.Codes[i*m.K+j]] * scale(i, j))
		}
	}
	return w
}

// DequantQFloat returns the float32 values [N, K] of a QFloat weight: each code (read from the
// row's bit stream) decoded as E2M1 (mxfp4, nvfp4) or E4M3 (mxfp8) times its group's scale
// (E8M0, or E4M3 for nvfp4), in float64 and rounded once.
func DequantQFloat(m *op.Matrix) []float32 {
	q := m.QF
	bits, g := q.Mode.Bits(), q.Mode.Group()
	words := m.K * bits / 32
	w := make([]float32, m.N*m.K)
	for n := 0; n < m.N; n++ {
		row := q.Codes[n*words : (n+1)*words]
		for i := 0; i < m.K; i++ {
			c := uint8(streamCode(row, i, bits))
			s := q.Scales[n*(m.K/g)+i/g]
			var v float64
			switch q.Mode {
			case op.MXFP4:
				v = e2m1Table[c] * E8M0(s)
			case op.NVFP4:
				v = e2m1Table[c] * e4m3Table[s]
			case op.MXFP8:
				v = e4m3Table[c] * E8M0(s)
			}
			w[n*m.K+i] = to32(v)
		}
	}
	return w
}
