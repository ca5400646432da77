package kernels

import (
	"math"

	"github.com/stratakernels/strata/internal/qdot"
	"github.com/stratakernels/strata/op"
)

// The int8 form of a GGML weight (compute mode int8): each row decoded by ggmlCodes (ggml.go)
// into signed 8-bit codes with a scale and offset per run of 16, handed to qdot's int8 kernels
// as a qdot.Int8Rows weight in groups of 32 (the activation block), read from the file's blocks
// on every call (no packed copy: resident bytes stay the file's).
//
// Where a group's two runs share their scale and offset, the group is exactly ggml's: codes as
// they are, scale s, bias o (the types with a min: Q4_1, Q5_1, Q4_K, Q5_K; the others have no
// bias). That is every group of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, IQ4_NL, IQ4_XS and
// MXFP4 (their scales and mins are per 32 or per block). Q2_K, Q3_K and Q6_K scale (and Q2_K
// offsets) each 16 elements apart; a group whose halves differ is requantized from its exact
// values v (float64): without a min, scale S = max|v| / 127 and codes RNE(v / S); with Q2_K's
// min, bias B = (max v + min v) / 2, S = (max v - min v) / 254, codes RNE((v - B) / S), the
// scale and bias rounded to float32 first. That adds at most S/2 to an element (for Q6_K,
// whose step is about max|v| / 32, an eighth of a step; less than rounding the activations to
// 8 bits costs).

// ggmlHasMin reports whether type t's elements carry an offset (a min or Q4_1's m).
func ggmlHasMin(t op.GGMLType) bool {
	switch t {
	case op.GGMLQ4_1, op.GGMLQ5_1, op.GGMLQ2_K, op.GGMLQ4_K, op.GGMLQ5_K:
		return true
	}
	return false
}

// ggmlInt8 is m's int8 form (m a validated GGML weight).
func ggmlInt8(m *op.Matrix) *qdot.Int8Rows {
	g, K := m.GG, m.K
	bias := ggmlHasMin(g.Type)
	return &qdot.Int8Rows{N: m.N, K: K, Group: 32, Bias: bias, Row: func(n int, q []int32, s, b []float32) {
		ggmlInt8Row(g, K, n, bias, q, s, b)
	}}
}

// ggmlInt8Row writes row n's int8 codes into q (len K; nil: not wanted), its group scales into
// s and (bias) its group offsets into b (len K/32).
func ggmlInt8Row(g *op.GGMLBlocks, K, n int, bias bool, q []int32, s, b []float32) {
	bs, ts := g.Type.BlockSize(), g.Type.TypeSize()
	var c [ggmlChunk]byte
	var rs, ro [ggmlChunk / ggmlRun]float32
	per := ggmlChunk / bs
	b0, b1 := n*K/bs, (n+1)*K/bs
	for blk := b0; blk < b1; blk += per {
		nb := min(per, b1-blk)
		ggmlCodes(g.Type, g.Data[blk*ts:(blk+nb)*ts], nb, c[:nb*bs], rs[:], ro[:])
		e0 := (blk - b0) * bs // first element of the chunk in the row
		for gi := 0; gi < nb*bs/32; gi++ {
			cs := c[32*gi : 32*gi+32]
			sa, sb, oa, ob := rs[2*gi], rs[2*gi+1], ro[2*gi], ro[2*gi+1]
			G := e0/32 + gi
			if math.Float32bits(sa) == math.Float32bits(sb) && math.Float32bits(oa) == math.Float32bits(ob) {
				s[G] = sa
				if bias {
					b[G] = oa
				}
				if q != nil {
					for i, v := range cs {
						q[32*G+i] = int32(int8(v))
					}
				}
				continue
			}
			var v [32]float64
			lo, hi := math.Inf(1), math.Inf(-1)
			for i, x := range cs {
				sc, off := sa, oa
				if i >= 16 {
					sc, off = sb, ob
				}
				v[i] = float64(int8(x))*float64(sc) + float64(off)
				lo, hi = min(lo, v[i]), max(hi, v[i])
			}
			var B float32
			S := float32(max(hi, -lo) / 127)
			if bias {
				B, S = float32((hi+lo)/2), float32((hi-lo)/254)
				b[G] = B
			}
			s[G] = S
			if q != nil {
				for i := range v {
					r := 0.0
					if S != 0 {
						r = math.RoundToEven((v[i] - float64(B)) / float64(S))
					}
					if r != r {
						r = 0 // a NaN element: the group's scale is NaN too
					}
					q[32*G+i] = int32(min(max(r, -127), 127))
				}
			}
		}
	}
}
