package optest

import (
	"math"
	"testing"

	"github.com/stratakernels/strata/op"
)

// TestGGMLFormats pins the GGML block layouts of ref_ggml.go on hand-made blocks: each sets a
// few bytes (halves 0x3c00 = 1, 0x3800 = 0.5, 0xbc00 = -1, 0x3400 = 0.25, 0x4000 = 2) and checks
// the elements they reach, worked out by hand from ggml's dequantize_row_<type>; every other
// byte is zero.
func TestGGMLFormats(t *testing.T) {
	type want struct {
		e int
		v float64
	}
	cases := []struct {
		t     op.GGMLType
		bytes map[int]byte
		want  []want
	}{
		{op.GGMLQ4_0, map[int]byte{1: 0x3c, 2: 0x21, 17: 0xf0}, []want{{0, -7}, {16, -6}, {15, -8}, {31, 7}, {1, -8}}},
		{op.GGMLQ4_1, map[int]byte{1: 0x38, 3: 0xbc, 7: 0x5a}, []want{{3, 4}, {19, 1.5}, {0, -1}}},
		// qh (bytes 2..5) bits 3 and 20; qs at 6.
		{op.GGMLQ5_0, map[int]byte{1: 0x3c, 2: 0x08, 4: 0x10, 9: 0x12}, []want{{3, 2}, {19, -15}, {20, 0}, {4, -16}}},
		{op.GGMLQ5_1, map[int]byte{1: 0x3c, 3: 0x38, 7: 0x80, 23: 0xf0}, []want{{31, 31.5}, {15, 0.5}}},
		{op.GGMLQ8_0, map[int]byte{1: 0x34, 7: 0x81, 8: 0x7f}, []want{{5, -31.75}, {6, 31.75}, {0, 0}}},
		// scales[9] = sc 3, min 2; scales[15] = sc 1, min 1; qs[52] (byte 68) = q 2 at shift 0, 3 at shift 6.
		{op.GGMLQ2_K, map[int]byte{9: 0x23, 15: 0x11, 68: 0xc2, 81: 0x3c, 83: 0x38}, []want{{148, 5}, {244, 2.5}, {0, 0}}},
		// sub-block 5 scale 33 (byte 5 low nibble 1, byte 9 bits 2..3 = 2), sub-block 13 scale 18
		// (byte 5 high nibble 2, byte 9 bits 6..7 = 1); qs[17] (byte 49) q2 3 at shift 4, no
		// hmask bit; qs[48] (byte 80) q2 1 at shift 4, hmask[16] bit 6.
		{op.GGMLQ3_K, map[int]byte{96 + 5: 0x21, 96 + 9: 0x48, 32 + 17: 0x30, 32 + 48: 0x10, 16: 0x40, 109: 0x3c},
			[]want{{81, -1}, {208, -14}, {0, 32 * 4}}},
		// d 1, dmin 0.5; sub-block 1: sc b[1] = 3, m b[5] = 4; sub-block 6: sc b[10]&15 | b[2]>>6<<4
		// = 17, m b[10]>>4 | b[6]>>6<<4 = 34.
		{op.GGMLQ4_K, map[int]byte{1: 0x3c, 3: 0x38, 4 + 1: 3, 4 + 5: 4, 4 + 10: 0x21, 4 + 2: 0x40, 4 + 6: 0x80, 16 + 7: 0x90, 16 + 96: 0x05},
			[]want{{39, 25}, {192, 68}, {32, -2}}},
		{op.GGMLQ5_K, map[int]byte{1: 0x3c, 3: 0x38, 4 + 1: 3, 4 + 5: 4, 16 + 7: 0x02, 48 + 7: 0x90}, []want{{39, 73}, {7, 0}}},
		// element 229 (h 1, k 3, l 5): ql[101] high nibble 10, qh[32+5] bits 6..7 = 2, scale[14] = -2.
		{op.GGMLQ6_K, map[int]byte{101: 0xa0, 128 + 37: 0x80, 192 + 14: 0xfe, 209: 0x3c}, []want{{229, -20}, {0, 0}}},
		{op.GGMLIQ4_NL, map[int]byte{1: 0x40, 2: 0xf0}, []want{{0, -254}, {16, 226}, {1, -254}}},
		// sub-block 3: ls = scales_l[1] >> 4 | (scales_h >> 6 & 3) << 4 = 5 | 32.
		{op.GGMLIQ4_XS, map[int]byte{1: 0x3c, 2: 0x80, 5: 0x50, 8 + 48 + 1: 0x80}, []want{{96 + 17, 5}, {96, -127 * 5}, {0, 127 * 32}}},
		{op.GGMLMXFP4, map[int]byte{0: 130, 1: 0x7f, 2: 0x08}, []want{{0, -48}, {16, 48}, {1, 0}, {17, 0}}},
		{op.GGMLMXFP4, map[int]byte{0: 0, 1: 0x01}, []want{{0, 0x1p-128}}},
	}
	for _, c := range cases {
		b := make([]byte, c.t.TypeSize())
		for i, v := range c.bytes {
			b[i] = v
		}
		vals := GGMLBlockValues(c.t, b)
		for _, w := range c.want {
			if vals[w.e] != w.v {
				t.Errorf("%v element %d = %g, want %g", c.t, w.e, vals[w.e], w.v)
			}
		}
		if c.t == op.GGMLMXFP4 && math.Signbit(vals[1]) {
			t.Errorf("MXFP4 code 8 decodes to -0 (ggml's table holds +0)")
		}
	}
	// A Matrix of blocks: rows of K/BlockSize blocks, Bytes the data as stored.
	for _, q := range ggmlQuants() {
		m := q.matrix(t, 3, 5, 512, 0.1)
		if want := int64(5 * 512 / q.GG.BlockSize() * q.GG.TypeSize()); m.Bytes() != want {
			t.Errorf("%v: %d bytes, want %d", q.GG, m.Bytes(), want)
		}
		w := DequantGGML(m)
		bs, ts := q.GG.BlockSize(), q.GG.TypeSize()
		blk := 512/bs + 1 // row 1's second block
		for e, v := range GGMLBlockValues(q.GG, m.GG.Data[blk*ts:(blk+1)*ts]) {
			if w[blk*bs+e] != float32(v) {
				t.Fatalf("%v: element %d of row 1 = %g, want %g", q.GG, bs+e, w[blk*bs+e], v)
			}
		}
	}
}

// TestGGMLGenerators: the generated GGML weights have values of order the requested scale (RMS
// within 0.3x to 3x), of both signs, with at least 20 distinct values (MXFP4 has 15 codes and a power-of-two scale), and
// are finite.
func TestGGMLGenerators(t *testing.T) {
	for _, q := range ggmlQuants() {
		const n, k, scale = 64, 512, 0.1
		m := q.matrix(t, 11, n, k, scale)
		var ss float64
		var pos, neg int
		distinct := map[float32]bool{}
		for _, v := range DequantGGML(m) {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%v: non-finite value", q.GG)
			}
			ss += float64(v) * float64(v)
			if v > 0 {
				pos++
			} else if v < 0 {
				neg++
			}
			distinct[v] = true
		}
		rms := math.Sqrt(ss / (n * k))
		if !(rms > 0.3*scale && rms < 3*scale) || pos < n*k/5 || neg < n*k/5 || len(distinct) < 20 {
			t.Errorf("%v: RMS %.3g (scale %g), %d positive, %d negative, %d distinct values", q.GG, rms, scale, pos, neg, len(distinct))
		} else {
			t.Logf("%v: RMS %.3g, %d distinct values", q.GG, rms, len(distinct))
		}
	}
}
