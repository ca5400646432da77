package optest

import (
	"github.com/stratakernels/strata/op"
)

// GGML weight cases, appended to the quantized tables of cases_quant.go: op.GGML blocks of every
// type of op.GGMLBlockTypes (RandGGML: random codes, sane scales), for each op that reads a
// weight matrix: MatMul, MoEExperts (split and fused gate_up, mixed types per layer as the
// Q4_K_M and UD files mix them), Embed, GRRead and PLEApply. Rows are 512 or 256 wide (two
// or one super-blocks of the 256-element K-quants), and the 32-element types also run at K = 96
// (three blocks). The references compute with DequantGGML (each element exact in float64,
// rounded once: bitwise ggml's dequantize_row_<type>). Their subtests are named
// "Op/ggml_<type>/<shape>".

// ggmlQuants are the GGML block types, in op.GGMLBlockTypes's order.
func ggmlQuants() []Quant {
	var qs []Quant
	for _, t := range op.GGMLBlockTypes {
		qs = append(qs, Quant{GG: t})
	}
	return qs
}

// ggmlSuper reports whether q's blocks are the 256-element super-blocks of the K-quants and
// IQ4_XS.
func ggmlSuper(q Quant) bool { return q.GG.BlockSize() == 256 }

// shortGGML marks the types of the Short subset: one of each family (a legacy 4-bit type, Q8_0,
// a K-quant with mins, Q6_K, the non-linear IQ4_XS, MXFP4).
func shortGGML(q Quant) bool {
	switch q.GG {
	case op.GGMLQ4_0, op.GGMLQ8_0, op.GGMLQ4_K, op.GGMLQ6_K, op.GGMLIQ4_XS, op.GGMLMXFP4:
		return true
	}
	return false
}

var (
	ggQ4_0   = Quant{GG: op.GGMLQ4_0}
	ggQ8_0   = Quant{GG: op.GGMLQ8_0}
	ggQ4_K   = Quant{GG: op.GGMLQ4_K}
	ggQ5_K   = Quant{GG: op.GGMLQ5_K}
	ggQ6_K   = Quant{GG: op.GGMLQ6_K}
	ggIQ4_XS = Quant{GG: op.GGMLIQ4_XS}
	ggMXFP4  = Quant{GG: op.GGMLMXFP4}
)

// ggmlGEMMCases: every type at T = 1, 17, 65 over N = 97 and K = 512, the 32-element types at
// T = 3, K = 96, then wide products whose column blocks do not divide N (Q4_K and Q4_0 at
// K = 4096, N = 600; Q6_K at K = 2048).
func ggmlGEMMCases() []QGEMMCase {
	var cs []QGEMMCase
	for _, q := range ggmlQuants() {
		for _, T := range []int{1, 17, 65} {
			cs = append(cs, QGEMMCase{T: T, N: 97, K: 512, Q: q, Short: shortGGML(q) && T != 17})
		}
		if !ggmlSuper(q) {
			cs = append(cs, QGEMMCase{T: 3, N: 40, K: 96, Q: q, Short: true})
		}
	}
	return append(cs,
		QGEMMCase{T: 64, N: 600, K: 4096, Q: ggQ4_K},
		QGEMMCase{T: 5, N: 600, K: 4096, Q: ggQ4_0},
		QGEMMCase{T: 33, N: 300, K: 2048, Q: ggQ6_K})
}

// ggmlMoECases: every type as split experts (D 256; I 256 for the super-block types, 64 for the
// others), fused gate_up for a few, and the mixes of published files: Q4_K gate and up with a
// Q6_K down (Q4_K_M), IQ4_XS with Q5_K, MXFP4 with a Q8_0 down, and a sparse routing.
func ggmlMoECases() []QMoECase {
	var cs []QMoECase
	for _, q := range ggmlQuants() {
		I := 64
		if ggmlSuper(q) {
			I = 256
		}
		cs = append(cs, QMoECase{T: 17, E: 12, K: 10, D: 256, I: I, Split: true, Q: q, UpQ: q, DownQ: q, EmptyEvery: 7, Short: shortGGML(q)})
	}
	return append(cs,
		QMoECase{T: 3, E: 12, K: 10, D: 256, I: 256, Q: ggQ4_K, DownQ: ggQ6_K, Short: true},
		QMoECase{T: 17, E: 12, K: 10, D: 256, I: 64, Q: ggQ4_0, DownQ: ggQ8_0, EmptyEvery: 5},
		QMoECase{T: 17, E: 12, K: 10, D: 256, I: 256, Split: true, Q: ggIQ4_XS, UpQ: ggQ5_K, DownQ: ggQ6_K, EmptyEvery: 5, Short: true},
		QMoECase{T: 1, E: 12, K: 10, D: 256, I: 64, Split: true, Q: ggMXFP4, UpQ: ggMXFP4, DownQ: ggQ8_0, Short: true},
		QMoECase{T: 65, E: 64, K: 4, D: 256, I: 256, Split: true, Q: ggQ4_K, UpQ: ggQ4_K, DownQ: ggQ6_K, EmptyEvery: 5})
}

// ggmlEmbedCases: every type at 17 tokens of one stream (D 512), then 4 streams of 256.
func ggmlEmbedCases() []QEmbedCase {
	var cs []QEmbedCase
	for _, q := range ggmlQuants() {
		cs = append(cs, QEmbedCase{T: 17, S: 1, D: 512, Vocab: 50, Q: q, Short: shortGGML(q)})
	}
	return append(cs, QEmbedCase{T: 65, S: 4, D: 256, Vocab: 300, Q: ggQ4_K, Short: true})
}

// ggmlGRCases: the tiny qwen4exp GatedResidual read (4 x 256) with every type: rank 256 for the
// super-block types (Up's rows are R wide), 64 for the others.
func ggmlGRCases() []QGRCase {
	var cs []QGRCase
	for _, q := range ggmlQuants() {
		R := 64
		if ggmlSuper(q) {
			R = 256
		}
		cs = append(cs, QGRCase{GR: GRCase{T: 17, S: 4, D: 256, R: R, Inject: true}, Q: q, Short: shortGGML(q)})
	}
	return cs
}

// ggmlPLECases: the PLE layer of ple (heads of 32) with every 32-element type, and one head of
// 256 for the super-block types.
func ggmlPLECases(ple PLECase) []QPLECase {
	wide := ple
	wide.Heads, wide.HeadDim = 1, 256
	var cs []QPLECase
	for _, q := range ggmlQuants() {
		p := ple
		if ggmlSuper(q) {
			p = wide
		}
		cs = append(cs, QPLECase{PLE: p, Q: q, Short: shortGGML(q)})
	}
	return cs
}

// ggmlWith returns a copy of m whose blocks mut has changed (m is untouched).
func ggmlWith(m *op.Matrix, mut func(g *op.GGMLBlocks)) *op.Matrix {
	g := *m.GG
	mut(&g)
	c := *m
	c.GG = &g
	return &c
}

// ggmlBadMatMul is the bad-argument table of MatMul's GGML weights: no blocks, a byte too few
// or too many, a row that is not a whole number of blocks, an id ggml does not define, and known
// ids that are not block types strata runs (Q8_1, Q8_K, IQ2_XXS, F16).
func ggmlBadMatMul() []badCase[op.MatMul] {
	k4, _, _ := RandGGML(6, 4, 512, op.GGMLQ4_K, 1)
	q4, _, _ := RandGGML(7, 4, 64, op.GGMLQ4_0, 1)
	w := func(m *op.Matrix) func(e *env, a *op.MatMul) { return func(e *env, a *op.MatMul) { a.W = m } }
	retype := func(m *op.Matrix, t op.GGMLType) *op.Matrix {
		return ggmlWith(m, func(g *op.GGMLBlocks) { g.Type = t })
	}
	return []badCase[op.MatMul]{
		{"ggml_without_blocks", errArg, w(&op.Matrix{N: 4, K: 256, DType: op.GGML})},
		{"ggml_short_data", errShape, w(ggmlWith(k4, func(g *op.GGMLBlocks) { g.Data = g.Data[1:] }))},
		{"ggml_long_data", errShape, w(ggmlWith(q4, func(g *op.GGMLBlocks) { g.Data = append(g.Data[:len(g.Data):len(g.Data)], 0) }))},
		{"ggml_no_data", errShape, w(ggmlWith(q4, func(g *op.GGMLBlocks) { g.Data = nil }))},
		{"ggml_K_not_whole_blocks", errShape, w(retype(q4, op.GGMLQ4_K))},
		{"ggml_bytes_of_another_type", errShape, w(retype(k4, op.GGMLQ5_K))},
		{"ggml_unknown_type_99", errUnsupported, w(retype(q4, 99))},
		{"ggml_type_Q8_1", errUnsupported, w(retype(q4, op.GGMLQ8_1))},
		{"ggml_type_Q8_K", errUnsupported, w(retype(k4, op.GGMLQ8_K))},
		{"ggml_type_IQ2_XXS", errUnsupported, w(retype(k4, op.GGMLIQ2_XXS))},
		{"ggml_type_F16", errUnsupported, w(retype(q4, op.GGMLF16))},
	}
}
