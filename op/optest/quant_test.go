package optest

import (
	"testing"

	"github.com/stratakernels/strata/op"
)

// TestQuantFormat pins the MLX packing of FORMATS.md: the 4-bit word 0x76543210 holds the codes
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
