package optest

import (
	"math"
	"testing"

	"github.com/stratakernels/strata/op"
)

// TestQuantFormat pins the MLX packing of docs/FORMATS.md section 2: the 4-bit word 0x76543210 holds the codes
// 0..7, the 8-bit word 0xDDCCBBAA holds 170, 187, 204, 221, and a 3-bit stream straddles words;
// Dequant applies scale * q + bias per group, negative scales included.
func TestQuantFormat(t *testing.T) {
	q4 := &op.Quant{Bits: 4, Group: 32, ScaleDType: op.BF16, Codes: []uint32{0x76543210, 0xFEDCBA98, 0, 0}}
	for i := 0; i < 16; i++ {
		if c := QuantCode(q4, 32, 0, i); c != uint32(i) {
			t.Fatalf("4-bit code %d = %d", i, c)
		}
	}
	q8 := &op.Quant{Bits: 8, Codes: []uint32{0xDDCCBBAA}}
	for i, want := range []uint32{170, 187, 204, 221} {
		if c := QuantCode(q8, 4, 0, i); c != want {
			t.Fatalf("8-bit code %d = %d, want %d", i, c, want)
		}
	}
	// 3 bits: element 10 occupies bits 30, 31 of word 0 and bit 0 of word 1.
	q3 := &op.Quant{Bits: 3, Codes: []uint32{0b11 << 30, 1, 0}}
	if c := QuantCode(q3, 32, 0, 10); c != 0b111 {
		t.Fatalf("straddling 3-bit code = %03b", c)
	}
	s, _ := Round16([]float32{-0.5}, op.BF16)
	b, _ := Round16([]float32{2}, op.BF16)
	q4.Scales, q4.Biases = s, b
	m := &op.Matrix{N: 1, K: 32, DType: op.QAffine, Q: q4}
	if err := m.Validate("test"); err != nil {
		t.Fatal(err)
	}
	w := Dequant(m)
	if w[3] != -0.5*3+2 || w[15] != -0.5*15+2 {
		t.Fatalf("dequant %v", w[:16])
	}
	for _, bits := range op.QuantBits {
		for _, g := range op.QuantGroups {
			m, w, err := RandQuant(uint64(bits*g), 5, 256, bits, g, op.F16, 0.1)
			if err != nil {
				t.Fatal(err)
			}
			if len(w) != 5*256 || m.Bytes() != int64(4*5*256*bits/32+2*2*5*256/g) {
				t.Fatalf("bits %d group %d: %d values, %d bytes", bits, g, len(w), m.Bytes())
			}
		}
	}
}

// TestFloatFormats pins the float formats' decoders (op/weights_fp.go) on known values: E4M3's
// zero, subnormals, 1, 448, its two NaNs and its monotonic finite half; the E2M1 magnitudes and
// signs; E8M0's 2^-127, 1, 2^127 and +Inf (in float32); the packing (low nibble first, 8-bit
// codes in byte order); the FP8 block of every element of a weight with ragged edges; Bytes;
// and that the generators' encoders invert the decoders.
func TestFloatFormats(t *testing.T) {
	for b, want := range map[uint8]float64{0x00: 0, 0x01: 0x1p-9, 0x07: 7 * 0x1p-9, 0x08: 0x1p-6, 0x38: 1, 0x3c: 1.5,
		0x7e: 448, 0xfe: -448, 0x81: -0x1p-9, 0x40: 2, 0x0f: 0x1p-6 * 1.875} {
		if got := E4M3(b); got != want {
			t.Errorf("E4M3(%#02x) = %g, want %g", b, got, want)
		}
	}
	if !math.Signbit(E4M3(0x80)) || E4M3(0x80) != 0 {
		t.Errorf("E4M3(0x80) = %g, want -0", E4M3(0x80))
	}
	nans := 0
	for b := 0; b < 256; b++ {
		v := E4M3(uint8(b))
		if math.IsNaN(v) {
			nans++
			continue
		}
		if math.IsInf(v, 0) || math.Abs(v) > 448 {
			t.Errorf("E4M3(%#02x) = %g", b, v)
		}
		if b > 0 && b < 0x7f && !(v > E4M3(uint8(b-1))) {
			t.Errorf("E4M3 not increasing at %#02x", b)
		}
		if enc := encE4M3(v); v != 0 && enc != uint8(b) {
			t.Errorf("encE4M3(E4M3(%#02x)) = %#02x", b, enc)
		}
	}
	if nans != 2 || !math.IsNaN(E4M3(0x7f)) || !math.IsNaN(E4M3(0xff)) {
		t.Errorf("%d E4M3 NaNs", nans)
	}
	for c, want := range []float64{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6} {
		if got := E2M1(uint8(c)); got != want || (c == 8) != (math.Signbit(got) && got == 0) {
			t.Errorf("E2M1(%d) = %g, want %g", c, got, want)
		}
		if enc := encE2M1(want); c != 8 && enc != uint8(c) {
			t.Errorf("encE2M1(%g) = %d", want, enc)
		}
	}
	if E8M0(0) != 0x1p-127 || E8M0(127) != 1 || E8M0(254) != 0x1p127 || !math.IsInf(E8M0(255), 1) {
		t.Errorf("E8M0: %g %g %g %g", E8M0(0), E8M0(127), E8M0(254), to32(E8M0(255)))
	}

	// mxfp4: the word 0x76543210 holds the codes 0..7 (0, 0.5, ..., 6), the next 8..15 (negated);
	// scale 128: 2^1. mxfp8: the word 0x40383800 holds E4M3 0x00, 0x38, 0x38, 0x40 (0, 1, 1, 2).
	words := make([]uint32, 4)
	words[0], words[1] = 0x76543210, 0xFEDCBA98
	m, err := op.NewMatrixQFloat(1, 32, &op.QuantFloat{Mode: op.MXFP4, Codes: words, Scales: []uint8{128}})
	if err != nil {
		t.Fatal(err)
	}
	w := DequantQFloat(m)
	for i, want := range []float32{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12} {
		if w[i] != want {
			t.Fatalf("mxfp4 element %d = %g, want %g", i, w[i], want)
		}
	}
	m8, err := op.NewMatrixQFloat(1, 32, &op.QuantFloat{Mode: op.MXFP8, Codes: append([]uint32{0x40383800}, make([]uint32, 7)...), Scales: []uint8{126}})
	if err != nil {
		t.Fatal(err)
	}
	if w := DequantQFloat(m8); w[0] != 0 || w[1] != 0.5 || w[2] != 0.5 || w[3] != 1 {
		t.Fatalf("mxfp8 elements %v", w[:4])
	}
	if m.Bytes() != 4*4+1 || m8.Bytes() != 4*8+1 {
		t.Fatalf("QFloat bytes %d, %d", m.Bytes(), m8.Bytes())
	}

	// FP8Block [130, 129]: the scale grid is [2, 2]; block (bi, bj) has scale 2^(2bi+bj), every
	// code is 1.0 (0x38), so each element is the scale of its block.
	const N, K = 130, 129
	codes := make([]uint8, N*K)
	for i := range codes {
		codes[i] = 0x38
	}
	f := &op.BlockFP8{Codes: codes, ScaleDType: op.F32, ScalesF32: []float32{1, 2, 4, 8}, Grid: op.FP8Grid(N, K)}
	fm, err := op.NewMatrixFP8Block(N, K, f)
	if err != nil {
		t.Fatal(err)
	}
	fw := DequantFP8(fm)
	for i := 0; i < N; i++ {
		for j := 0; j < K; j++ {
			if want := float32(int(1) << (2*(i/128) + j/128)); fw[i*K+j] != want {
				t.Fatalf("FP8Block element (%d, %d) = %g, want %g", i, j, fw[i*K+j], want)
			}
		}
	}
	if fm.Bytes() != N*K+4*4 {
		t.Fatalf("FP8Block bytes %d", fm.Bytes())
	}
	for _, q := range fpQuants() {
		m := q.matrix(t, 7, 40, 256, 0.1)
		if err := m.Validate("test"); err != nil {
			t.Fatalf("%s: %v", q.Name(), err)
		}
		var want int64
		if q.FP8 {
			want = 40*256 + 2*2
			if q.ScaleDType == op.F32 {
				want = 40*256 + 4*2
			}
		} else {
			want = int64(40*256*q.Mode.Bits()/8 + 40*256/q.Mode.Group())
		}
		if m.Bytes() != want {
			t.Fatalf("%s: %d bytes, want %d", q.Name(), m.Bytes(), want)
		}
	}
}

// TestFloatGenerators: the generated float-format weights are the normal values they quantize,
// to the formats' precision (relative L2 error), so the cases' weights are not degenerate.
func TestFloatGenerators(t *testing.T) {
	for _, q := range fpQuants() {
		const n, k = 130, 288
		m := q.matrix(t, 11, n, k, 0.1)
		x := Floats(11, n*k, 0.1)
		var num, den float64
		for i, v := range Widen(m) {
			d := float64(v) - float64(x[i])
			num, den = num+d*d, den+float64(x[i])*float64(x[i])
		}
		bound := 0.05
		if q.Mode == op.MXFP4 || q.Mode == op.NVFP4 {
			bound = 0.2
		}
		if e := math.Sqrt(num / den); !(e < bound) {
			t.Errorf("%s: relative L2 error %.3g of the generated weight (bound %g)", q.Name(), e, bound)
		} else {
			t.Logf("%s: relative L2 error %.3g", q.Name(), e)
		}
	}
}
