package optest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/stratakernels/strata/op"
	"github.com/x448/float16"
)

// RandGGML returns a deterministic GGML weight [n, k] of block type t (one of
// op.GGMLBlockTypes; k a multiple of its block size) and its dequantized values (DequantGGML).
// Every block is valid and of the kind ggml's quantizers write: uniform random codes over the
// type's whole range, half-precision super-block scales of either sign where the type allows
// (about one in eight negative: ggml's Q4_0 / Q5_0 / Q8_0 / IQ4_NL quantizers take the sign of
// the block's largest magnitude), random 4-, 6- and 8-bit sub-block scales and mins, and
// mins about half the block's range, so that elements are of order scale and centred near
// zero. Errors wrap op.ErrUnsupported (t) or op.ErrShape (k).
func RandGGML(seed uint64, n, k int, t op.GGMLType, scale float32) (*op.Matrix, []float32, error) {
	if !slices.Contains(op.GGMLBlockTypes, t) {
		return nil, nil, fmt.Errorf("RandGGML: %w: GGML type %v", op.ErrUnsupported, t)
	}
	row, err := t.RowBytes(k)
	if err != nil {
		return nil, nil, fmt.Errorf("RandGGML: %w", err)
	}
	r := rand.New(rand.NewPCG(seed, 0x991))
	data := make([]byte, n*row)
	ts := t.TypeSize()
	for i := 0; i < len(data); i += ts {
		randGGMLBlock(r, t, data[i:i+ts], float64(scale))
	}
	m, err := op.NewMatrixGGML(n, k, &op.GGMLBlocks{Type: t, Data: data})
	if err != nil {
		return nil, nil, err
	}
	return m, DequantGGML(m), nil
}

// randGGMLBlock fills block b of type t (its fields as GGMLBlockValues reads them).
func randGGMLBlock(r *rand.Rand, t op.GGMLType, b []byte, scale float64) {
	for i := range b {
		b[i] = byte(r.UintN(256)) // codes, high bits and sub-block scales: uniform
	}
	// f16 writes v (positive, or of either sign when signed) times 0.5..1.5 at b.
	f16 := func(b []byte, v float64, signed bool) {
		v *= 0.5 + r.Float64()
		if signed && r.IntN(8) == 0 {
			v = -v
		}
		binary.LittleEndian.PutUint16(b, float16.Fromfloat32(float32(v)).Bits())
	}
	switch t {
	case op.GGMLQ4_0, op.GGMLIQ4_NL:
		d := scale / 8
		if t == op.GGMLIQ4_NL {
			d = scale / 127 * 1.5
		}
		f16(b, d, true)
	case op.GGMLQ4_1:
		f16(b, scale/8, false)
		f16(b[2:], -scale, false)
	case op.GGMLQ5_0:
		f16(b, scale/16, true)
	case op.GGMLQ5_1:
		f16(b, scale/16, false)
		f16(b[2:], -scale, false)
	case op.GGMLQ8_0:
		f16(b, scale/127*1.5, true)
		for i := 2; i < 34; i++ {
			b[i] = byte(int8(r.IntN(255) - 127)) // ggml's quantizer writes -127..127
		}
	case op.GGMLQ2_K:
		// w = d*sc*q - dmin*m, q in 0..3, sc and m in 0..15: dmin*m about half of d*sc*3.
		f16(b[80:], scale/15, false)
		f16(b[82:], scale/15, false)
	case op.GGMLQ3_K:
		f16(b[108:], scale/(4*32), true)
	case op.GGMLQ4_K:
		f16(b, scale/(15*40), false)
		f16(b[2:], scale/40, false)
	case op.GGMLQ5_K:
		f16(b, scale/(31*40), false)
		f16(b[2:], scale/40, false)
	case op.GGMLQ6_K:
		f16(b[208:], scale/(32*100), true)
	case op.GGMLIQ4_XS:
		f16(b, scale/(127*20), true)
	case op.GGMLMXFP4:
		// kv[q] * 2^(e-128) with |kv| <= 12: e so that 12 * 2^(e-128) is about 2 * scale.
		b[0] = byte(128 + int(math.Round(math.Log2(2*scale/12))) + r.IntN(3) - 1)
	}
}
