package optest

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// Dense-op cases: GEMM, RMSNorm1p, RoPE, the element-wise ops, Embed, MoE routing / experts /
// combine, GatedResidual and PLE. Sizes are small versions of the real models' (D 256 instead of
// 2560, 12 experts instead of 512) so that every backend, emulator included, runs the whole list
// in seconds, while the token counts cover the edges of 64-wide tiles. Cases marked Short form
// the representative subset of Options.Short. New cases are appended to a table, never inserted:
// the runners derive seeds from a case's index, and other tests index the tables.

// DenseT is the list of token counts every dense op runs at.
var DenseT = []int{1, 3, 17, 63, 64, 65, 300}

// WeightDTypes are the weight element types the GEMM-based ops take.
var WeightDTypes = []op.DType{op.F32, op.BF16, op.F16}

// shortT is the token counts of the Short subset: one row (the vector paths) and one full tile
// plus one row.
func shortT(T int) bool { return T == 1 || T == 65 }

// GEMMCase is y [T, N] = x [T, K] * W^T with W [N, K] of DType.
type GEMMCase struct {
	T, N, K int
	DType   op.DType
	Short   bool
}

// Name is the case's subtest name.
func (c GEMMCase) Name() string { return fmt.Sprintf("T%d_N%d_K%d_%v", c.T, c.N, c.K, c.DType) }

// GEMMCases: every T x dtype at a square-ish shape whose N and K are not multiples of 16, plus
// the tiny models' projection shapes (hidden 256, q_proj 6144, expert 64x256); then T = 0 (no
// rows: nothing to do) and a K = 4096 weight whose row panels do not divide N = 600.
func GEMMCases() []GEMMCase {
	var cs []GEMMCase
	for _, dt := range WeightDTypes {
		for _, T := range DenseT {
			cs = append(cs, GEMMCase{T: T, N: 97, K: 130, DType: dt, Short: shortT(T)})
		}
		cs = append(cs, GEMMCase{T: 17, N: 64, K: 256, DType: dt}, GEMMCase{T: 65, N: 256, K: 768, DType: dt})
	}
	cs = append(cs, GEMMCase{T: 0, N: 97, K: 130, DType: op.F32, Short: true},
		GEMMCase{T: 5, N: 600, K: 4096, DType: op.BF16}, GEMMCase{T: 5, N: 600, K: 4096, DType: op.F16})
	return cs
}

// NormCase is RMSNorm1p over rows = T*S vectors of D (S = 1) or the grouped form with S
// streams of D per token (S > 1).
type NormCase struct {
	T, S, D int
	Short   bool
}

// Name is the case's subtest name.
func (c NormCase) Name() string { return fmt.Sprintf("T%d_S%d_D%d", c.T, c.S, c.D) }

// NormCases covers every T, plain (D 256, 130) and grouped (4 x 256).
func NormCases() []NormCase {
	var cs []NormCase
	for _, T := range DenseT {
		s := shortT(T)
		cs = append(cs, NormCase{T, 1, 256, s}, NormCase{T, 1, 130, s}, NormCase{T, 4, 256, s})
	}
	return cs
}

// RoPECase is rotary embedding on [T, H, Dh] at positions Pos0+t (or per-row positions when
// PerRow), rotating the first Rot dims. No op of op.Pass is RoPE alone (QSAPrep and QSAIndex
// fuse it with RMSNorm1p; QSAPrepCases cover these positions); the table serves backends' own
// RoPE kernels with RefRoPE.
type RoPECase struct {
	T, H, Dh, Rot, Pos0 int
	Theta               float64
	PerRow              bool
	Short               bool
}

// Name is the case's subtest name.
func (c RoPECase) Name() string {
	return fmt.Sprintf("T%d_H%d_d%d_rot%d_pos%d_row%v", c.T, c.H, c.Dh, c.Rot, c.Pos0, c.PerRow)
}

// Positions returns the case's positions: Pos0+t, or (t*7919) mod 5000 when PerRow.
func (c RoPECase) Positions() []int32 {
	pos := make([]int32, c.T)
	for j := range pos {
		pos[j] = int32(c.Pos0 + j)
		if c.PerRow {
			pos[j] = int32((j * 7919) % 5000)
		}
	}
	return pos
}

// RoPECases: attention heads (256, rot 64, theta 1e7), indexer heads (128, rot 64), a full
// rotation, large positions and per-row positions.
func RoPECases() []RoPECase {
	var cs []RoPECase
	for _, T := range DenseT {
		cs = append(cs, RoPECase{T: T, H: 3, Dh: 256, Rot: 64, Pos0: 200, Theta: 1e7, Short: shortT(T)})
	}
	cs = append(cs,
		RoPECase{T: 17, H: 5, Dh: 128, Rot: 64, Pos0: 0, Theta: 1e7},
		RoPECase{T: 3, H: 2, Dh: 64, Rot: 64, Pos0: 4000, Theta: 1e4, Short: true},
		RoPECase{T: 65, H: 2, Dh: 256, Rot: 64, Pos0: 0, Theta: 1e7, PerRow: true, Short: true},
		RoPECase{T: 1, H: 24, Dh: 256, Rot: 64, Pos0: 262143, Theta: 1e7, Short: true},
	)
	return cs
}

// EltCase is one case of the element-wise ops (Add, SigmoidMul, SwiGLU, RowSigmoidScale, Copy)
// on T rows of D.
type EltCase struct {
	T, D  int
	Short bool
}

// Name is the case's subtest name.
func (c EltCase) Name() string { return fmt.Sprintf("T%d_D%d", c.T, c.D) }

// EltCases: every T at a width that is not a multiple of 8 (130) and at 256; T = 300 x 256 is
// more than the 1<<14 elements one CPU worker takes.
func EltCases() []EltCase {
	var cs []EltCase
	for _, T := range DenseT {
		cs = append(cs, EltCase{T: T, D: 130, Short: shortT(T)}, EltCase{T: T, D: 256})
	}
	return cs
}

// EmbedCase gathers T token rows of a [Vocab, D] table of DType into S streams.
type EmbedCase struct {
	T, S, D, Vocab int
	DType          op.DType
	Short          bool
}

// Name is the case's subtest name.
func (c EmbedCase) Name() string {
	return fmt.Sprintf("T%d_S%d_D%d_V%d_%v", c.T, c.S, c.D, c.Vocab, c.DType)
}

// EmbedCases: the tiny qwen4exp shape (4 streams of 256, BF16) at every T, and one stream of an
// odd width per dtype.
func EmbedCases() []EmbedCase {
	var cs []EmbedCase
	for _, T := range DenseT {
		cs = append(cs, EmbedCase{T: T, S: 4, D: 256, Vocab: 1000, DType: op.BF16, Short: shortT(T)})
	}
	for _, dt := range WeightDTypes {
		cs = append(cs, EmbedCase{T: 17, S: 1, D: 130, Vocab: 50, DType: dt, Short: true})
	}
	return cs
}

// MoECase is one MoE block: routing T tokens over E experts (top-K, renormalised when Norm),
// experts of hidden D and intermediate I with weights of DType. With Ties the router logits are
// rounded to multiples of 1/2 (many exact ties, which go to the lower expert index). EmptyEvery
// > 0 empties the expert slots i (t*K + j) with i mod EmptyEvery = EmptyEvery/2 (1: every slot).
type MoECase struct {
	T, E, K, D, I int
	Norm          bool
	DType         op.DType
	Ties          bool
	EmptyEvery    int
	Short         bool
}

// Name is the case's subtest name.
func (c MoECase) Name() string {
	return fmt.Sprintf("T%d_E%d_K%d_D%d_I%d_norm%v_%v_ties%v_empty%d", c.T, c.E, c.K, c.D, c.I, c.Norm, c.DType, c.Ties, c.EmptyEvery)
}

// MoECases: the tiny models' routing (12 experts, top-10, D 256, I 32) at every T, a sparser
// routing (64 experts, top-4: most experts get no row) per dtype, then exact-tie routings and a
// block whose slots are all empty.
func MoECases() []MoECase {
	var cs []MoECase
	for _, T := range DenseT {
		cs = append(cs, MoECase{T: T, E: 12, K: 10, D: 256, I: 32, Norm: true, DType: op.BF16, EmptyEvery: 7, Short: shortT(T)})
	}
	for _, dt := range WeightDTypes {
		cs = append(cs, MoECase{T: 65, E: 64, K: 4, D: 128, I: 48, Norm: false, DType: dt, EmptyEvery: 5, Short: dt != op.BF16})
	}
	cs = append(cs,
		MoECase{T: 17, E: 12, K: 10, D: 64, I: 16, Norm: true, DType: op.F32, Ties: true, Short: true},
		MoECase{T: 65, E: 64, K: 4, D: 64, I: 16, Norm: false, DType: op.F16, Ties: true},
		MoECase{T: 3, E: 12, K: 10, D: 64, I: 16, Norm: true, DType: op.BF16, EmptyEvery: 1, Short: true},
	)
	return cs
}

// Empty reports whether slot i (t*K + j) of the case is empty.
func (c MoECase) Empty(i int) bool { return c.EmptyEvery > 0 && i%c.EmptyEvery == c.EmptyEvery/2 }

// CombineCase is one MoE combine (MoECombine, GRApplyMoEC) or GatedResidual write (GRWrite):
// T tokens, K slots over Rows = T*K + 5 expert rows of D, S streams, about one slot in 7 empty;
// Seed starts the case's input streams.
type CombineCase struct {
	T, S, K, D int
	Seed       uint64
	Short      bool
}

// Name is the case's subtest name.
func (c CombineCase) Name() string { return fmt.Sprintf("T%d_S%d_K%d_D%d", c.T, c.S, c.K, c.D) }

// Rows is the number of expert rows: T*K + 5 (some rows unused).
func (c CombineCase) Rows() int { return c.T*c.K + 5 }

// CombineCases: the tiny qwen4exp shape (4 x 256, top-10) at every T (seeded by T), then a
// small odd shape and one stream.
func CombineCases() []CombineCase {
	var cs []CombineCase
	for _, T := range DenseT {
		cs = append(cs, CombineCase{T: T, S: 4, K: 10, D: 256, Seed: uint64(T), Short: shortT(T)})
	}
	cs = append(cs, CombineCase{T: 3, S: 2, K: 3, D: 96, Seed: 1001, Short: true},
		CombineCase{T: 17, S: 1, K: 4, D: 130, Seed: 1002})
	return cs
}

// GRCase is one GatedResidual module: S streams of D, rank R, with or without the inject
// weight (the final mixer has none), weights of DType.
type GRCase struct {
	T, S, D, R int
	Inject     bool
	DType      op.DType
	Short      bool
}

// Name is the case's subtest name.
func (c GRCase) Name() string {
	return fmt.Sprintf("T%d_S%d_D%d_R%d_inj%v_%v", c.T, c.S, c.D, c.R, c.Inject, c.DType)
}

// GRCases: the tiny qwen4exp shape (4 x 256, rank 32) at every T, the mixer form, and per dtype.
func GRCases() []GRCase {
	var cs []GRCase
	for _, T := range DenseT {
		cs = append(cs, GRCase{T: T, S: 4, D: 256, R: 32, Inject: true, DType: op.BF16, Short: shortT(T)})
	}
	cs = append(cs, GRCase{T: 17, S: 4, D: 256, R: 32, Inject: false, DType: op.BF16, Short: true})
	for _, dt := range WeightDTypes {
		cs = append(cs, GRCase{T: 3, S: 2, D: 96, R: 40, Inject: true, DType: dt, Short: true})
	}
	return cs
}

// PLECase is one PLE layer: S streams of D, Heads hashed ids per token with HeadDim each,
// a table of Rows, conv kernel ConvK with Dilation, and a split point for chunked runs
// (0 < Split < T; 0 means no split).
type PLECase struct {
	T, S, D, Heads, HeadDim, Rows, ConvK, Dilation, Split int
	DType                                                 op.DType
	Short                                                 bool
}

// Name is the case's subtest name.
func (c PLECase) Name() string {
	return fmt.Sprintf("T%d_S%d_D%d_heads%d_split%d_%v", c.T, c.S, c.D, c.Heads, c.Split, c.DType)
}

// PLECases: the tiny qwen4exp shape (4 x 256, 16 heads x 6, 16896 rows) at every T, with
// chunked splits shorter and longer than the conv state (9 steps), then small shapes in F32 and
// F16.
func PLECases() []PLECase {
	var cs []PLECase
	for _, T := range DenseT {
		cs = append(cs, PLECase{T: T, S: 4, D: 256, Heads: 16, HeadDim: 6, Rows: 16896, ConvK: 4, Dilation: 3,
			Split: T / 2, DType: op.BF16, Short: T == 3 || T == 17})
	}
	cs = append(cs, PLECase{T: 20, S: 2, D: 64, Heads: 4, HeadDim: 8, Rows: 300, ConvK: 4, Dilation: 3, Split: 4, DType: op.F32, Short: true},
		PLECase{T: 20, S: 2, D: 64, Heads: 4, HeadDim: 8, Rows: 300, ConvK: 4, Dilation: 3, Split: 11, DType: op.F16, Short: true})
	return cs
}
