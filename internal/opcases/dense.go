package opcases

import (
	"math"
	"math/rand/v2"

	"github.com/x448/float16"
)

// Dense-op cases: GEMM, RMSNorm1p, RoPE, MoE routing/experts/combine, GatedResidual and PLE.
// Sizes are small versions of the real models' (D 256 instead of 2560, 12 experts instead of
// 512) so that every backend, emulator included, runs the whole list in seconds, while the
// token counts cover the edges of 64-wide tiles. Weight dtypes are named as in safetensors.

// DenseT is the list of token counts every dense op runs at.
var DenseT = []int{1, 3, 17, 63, 64, 65, 300}

// WeightDTypes are the weight element types the GEMM-based ops take.
var WeightDTypes = []string{"F32", "BF16", "F16"}

// GEMMCase is y [T, N] = x [T, K] * W^T with W [N, K] of DType.
type GEMMCase struct {
	T, N, K int
	DType   string
}

// GEMMCases: every T x dtype at a square-ish shape whose N and K are not multiples of 16, plus
// the tiny models' projection shapes (hidden 256, q_proj 6144, expert 64x256).
func GEMMCases() []GEMMCase {
	var cs []GEMMCase
	for _, dt := range WeightDTypes {
		for _, T := range DenseT {
			cs = append(cs, GEMMCase{T: T, N: 97, K: 130, DType: dt})
		}
		cs = append(cs, GEMMCase{T: 17, N: 64, K: 256, DType: dt}, GEMMCase{T: 65, N: 256, K: 768, DType: dt})
	}
	return cs
}

// NormCase is RMSNorm1p over rows = T*S vectors of D (S = 1) or the grouped form with S
// streams of D per token (S > 1).
type NormCase struct {
	T, S, D int
}

// NormCases covers every T, plain (D 256, 130) and grouped (4 x 256).
func NormCases() []NormCase {
	var cs []NormCase
	for _, T := range DenseT {
		cs = append(cs, NormCase{T, 1, 256}, NormCase{T, 1, 130}, NormCase{T, 4, 256})
	}
	return cs
}

// RoPECase is rotary embedding on [T, H, Dh] at positions Pos0+t (or per-row positions when
// PerRow), rotating the first Rot dims.
type RoPECase struct {
	T, H, Dh, Rot, Pos0 int
	Theta               float64
	PerRow              bool
}

// RoPECases: attention heads (256, rot 64, theta 1e7), indexer heads (128, rot 64), a full
// rotation, large positions and per-row positions.
func RoPECases() []RoPECase {
	var cs []RoPECase
	for _, T := range DenseT {
		cs = append(cs, RoPECase{T: T, H: 3, Dh: 256, Rot: 64, Pos0: 200, Theta: 1e7})
	}
	cs = append(cs,
		RoPECase{T: 17, H: 5, Dh: 128, Rot: 64, Pos0: 0, Theta: 1e7},
		RoPECase{T: 3, H: 2, Dh: 64, Rot: 64, Pos0: 4000, Theta: 1e4},
		RoPECase{T: 65, H: 2, Dh: 256, Rot: 64, Pos0: 0, Theta: 1e7, PerRow: true},
		RoPECase{T: 1, H: 24, Dh: 256, Rot: 64, Pos0: 262143, Theta: 1e7},
	)
	return cs
}

// MoECase is one MoE block: routing T tokens over E experts (top-K, renormalised when Norm),
// experts of hidden D and intermediate I with weights of DType.
type MoECase struct {
	T, E, K, D, I int
	Norm          bool
	DType         string
}

// MoECases: the tiny models' routing (12 experts, top-10, D 256, I 32) at every T, and a
// sparser routing (64 experts, top-4) per dtype.
func MoECases() []MoECase {
	var cs []MoECase
	for _, T := range DenseT {
		cs = append(cs, MoECase{T: T, E: 12, K: 10, D: 256, I: 32, Norm: true, DType: "BF16"})
	}
	for _, dt := range WeightDTypes {
		cs = append(cs, MoECase{T: 65, E: 64, K: 4, D: 128, I: 48, Norm: false, DType: dt})
	}
	return cs
}

// GRCase is one GatedResidual module: S streams of D, rank R, with or without the inject
// weight (the final mixer has none), weights of DType.
type GRCase struct {
	T, S, D, R int
	Inject     bool
	DType      string
}

// GRCases: the tiny qwen4exp shape (4 x 256, rank 32) at every T, the mixer form, and per dtype.
func GRCases() []GRCase {
	var cs []GRCase
	for _, T := range DenseT {
		cs = append(cs, GRCase{T: T, S: 4, D: 256, R: 32, Inject: true, DType: "BF16"})
	}
	cs = append(cs, GRCase{T: 17, S: 4, D: 256, R: 32, Inject: false, DType: "BF16"})
	for _, dt := range WeightDTypes {
		cs = append(cs, GRCase{T: 3, S: 2, D: 96, R: 40, Inject: true, DType: dt})
	}
	return cs
}

// PLECase is one PLE layer: S streams of D, Heads hashed ids per token with HeadDim each,
// a table of Rows, conv kernel ConvK with Dilation, and a split point for chunked runs
// (0 < Split < T; 0 means no split).
type PLECase struct {
	T, S, D, Heads, HeadDim, Rows, ConvK, Dilation, Split int
	DType                                                 string
}

// PLECases: the tiny qwen4exp shape (4 x 256, 16 heads x 6, 16896 rows) at every T, with
// chunked splits shorter and longer than the conv state (9 steps).
func PLECases() []PLECase {
	var cs []PLECase
	for _, T := range DenseT {
		cs = append(cs, PLECase{T: T, S: 4, D: 256, Heads: 16, HeadDim: 6, Rows: 16896, ConvK: 4, Dilation: 3,
			Split: T / 2, DType: "BF16"})
	}
	cs = append(cs, PLECase{T: 20, S: 2, D: 64, Heads: 4, HeadDim: 8, Rows: 300, ConvK: 4, Dilation: 3, Split: 4, DType: "F32"})
	return cs
}

// Floats returns n deterministic standard-normal values times scale (PCG seeded by seed).
func Floats(seed uint64, n int, scale float32) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64()) * scale
	}
	return x
}

// Uniform returns n deterministic values uniform in [lo, hi).
func Uniform(seed uint64, n int, lo, hi float32) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x0de))
	x := make([]float32, n)
	for i := range x {
		x[i] = lo + (hi-lo)*float32(r.Float64())
	}
	return x
}

// Round16 rounds x to dtype ("BF16" or "F16", round to nearest even) and returns the bits and
// the widened values (what a backend must compute with). For "F32" bits is nil and the values
// are x itself.
func Round16(x []float32, dtype string) (bits []uint16, widened []float32) {
	switch dtype {
	case "BF16":
		bits = make([]uint16, len(x))
		widened = make([]float32, len(x))
		for i, v := range x {
			u := math.Float32bits(v)
			u += 0x7fff + (u>>16)&1 // finite inputs only: round to nearest even
			bits[i] = uint16(u >> 16)
			widened[i] = math.Float32frombits(uint32(bits[i]) << 16)
		}
	case "F16":
		bits = make([]uint16, len(x))
		widened = make([]float32, len(x))
		for i, v := range x {
			h := float16.Fromfloat32(v)
			bits[i] = h.Bits()
			widened[i] = h.Float32()
		}
	default:
		return nil, x
	}
	return bits, widened
}

// Tokens returns n deterministic token ids in [0, vocab), with eos inserted at about every
// eosEvery-th position (eosEvery <= 0: never).
func Tokens(seed uint64, n, vocab int, eos int32, eosEvery int) []int32 {
	r := rand.New(rand.NewPCG(seed, 0x70c))
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(vocab))
		if eosEvery > 0 && r.IntN(eosEvery) == 0 {
			ids[i] = eos
		}
	}
	return ids
}

// Slots returns a deterministic slot table rk [T, K] over rows expert-output rows: every row
// used at most once, about one slot in emptyEvery empty (-1; emptyEvery <= 0: none).
// rows must be >= T*K.
func Slots(seed uint64, T, K, rows, emptyEvery int) []int32 {
	r := rand.New(rand.NewPCG(seed, 0x51d))
	perm := r.Perm(rows)
	rk := make([]int32, T*K)
	for i := range rk {
		rk[i] = int32(perm[i])
		if emptyEvery > 0 && r.IntN(emptyEvery) == 0 {
			rk[i] = -1
		}
	}
	return rk
}
