package optest

import (
	"github.com/stratakernels/strata/op"
)

// Float-format weight cases, appended to the quantized tables of cases_quant.go: op.FP8Block
// (E4M3 codes, one BF16 or F32 scale per 128 x 128 block) with N and K that 128 does not divide
// (ragged edge blocks, K not even a multiple of 8), and op.QFloat in each MLX mode (mxfp4,
// nvfp4, mxfp8), at T = 1, 3, 17, 64, 65. The references compute with DequantFP8 / DequantQFloat
// (codes and scales decoded from their bit fields, the product rounded once to float32). Their
// subtests are named "Op/fp8_<scales>/<shape>" and "Op/<mode>/<shape>".

// fpQuants are the float formats: FP8Block with BF16 and F32 scales, then the MLX modes.
func fpQuants() []Quant {
	qs := []Quant{{FP8: true, ScaleDType: op.BF16}, {FP8: true, ScaleDType: op.F32}}
	for _, m := range op.QuantModes {
		qs = append(qs, Quant{Mode: m})
	}
	return qs
}

var (
	fp8BF16 = Quant{FP8: true, ScaleDType: op.BF16}
	fp8F32  = Quant{FP8: true, ScaleDType: op.F32}
	mxfp4   = Quant{Mode: op.MXFP4}
	nvfp4   = Quant{Mode: op.NVFP4}
	mxfp8   = Quant{Mode: op.MXFP8}
)

// fpGEMMCases: every float format at T = 1, 3, 17, 64, 65 over N = 97 and K = 200 (FP8: a whole
// and a ragged block column) or 384 (the MLX modes), then FP8 edges (K = 129 and 77, not
// multiples of 8; N = 300; a K = 4096 weight whose row blocks do not divide N = 600) and the
// modes at other widths (nvfp4 K = 80: five groups of 16).
func fpGEMMCases() []QGEMMCase {
	var cs []QGEMMCase
	for _, q := range fpQuants() {
		K := 384
		if q.FP8 {
			K = 200
		}
		for _, T := range []int{1, 3, 17, 64, 65} {
			cs = append(cs, QGEMMCase{T: T, N: 97, K: K, Q: q, Short: T == 1 || T == 65})
		}
	}
	return append(cs,
		QGEMMCase{T: 3, N: 130, K: 129, Q: fp8BF16, Short: true},
		QGEMMCase{T: 5, N: 37, K: 77, Q: fp8F32, Short: true},
		QGEMMCase{T: 17, N: 300, K: 384, Q: fp8F32},
		QGEMMCase{T: 64, N: 600, K: 4096, Q: fp8BF16},
		QGEMMCase{T: 3, N: 64, K: 80, Q: nvfp4, Short: true},
		QGEMMCase{T: 5, N: 600, K: 2048, Q: mxfp8},
		QGEMMCase{T: 65, N: 33, K: 4096, Q: mxfp4})
}

// fpMoECases: FP8 experts with ragged D and I (fused and split gate_up), each MLX mode, a dense
// down, and one layer whose gate, up and down are three different float formats.
func fpMoECases() []QMoECase {
	return []QMoECase{
		{T: 17, E: 12, K: 10, D: 200, I: 72, Q: fp8BF16, DownQ: fp8BF16, EmptyEvery: 7, Short: true},
		{T: 3, E: 12, K: 10, D: 256, I: 136, Split: true, Q: fp8F32, UpQ: fp8F32, DownQ: fp8F32, Short: true},
		{T: 64, E: 16, K: 4, D: 130, I: 64, Split: true, Q: fp8BF16, UpQ: fp8BF16, DownQ: fp8BF16, EmptyEvery: 5},
		{T: 17, E: 12, K: 10, D: 256, I: 64, Split: true, Q: mxfp4, UpQ: mxfp4, DownQ: mxfp4, EmptyEvery: 7, Short: true},
		{T: 65, E: 64, K: 4, D: 128, I: 48, Q: nvfp4, DownQ: nvfp4, EmptyEvery: 5},
		{T: 17, E: 12, K: 10, D: 256, I: 96, Split: true, Q: mxfp8, UpQ: mxfp8, Short: true},
		{T: 1, E: 12, K: 10, D: 256, I: 64, Split: true, Q: mxfp4, UpQ: nvfp4, DownQ: fp8BF16, Short: true},
	}
}

// fpEmbedCases: FP8 tables with ragged rows and columns, and each MLX mode.
func fpEmbedCases() []QEmbedCase {
	return []QEmbedCase{
		{T: 17, S: 1, D: 200, Vocab: 300, Q: fp8BF16, Short: true},
		{T: 65, S: 4, D: 129, Vocab: 50, Q: fp8F32, Short: true},
		{T: 17, S: 1, D: 384, Vocab: 50, Q: mxfp4, Short: true},
		{T: 3, S: 2, D: 80, Vocab: 20, Q: nvfp4, Short: true},
		{T: 64, S: 1, D: 256, Vocab: 300, Q: mxfp8, Short: true},
	}
}

// fpGRCases: the tiny qwen4exp GatedResidual read with FP8 and mxfp4 / nvfp4 weights.
func fpGRCases() []QGRCase {
	gr := GRCase{T: 17, S: 4, D: 256, R: 64, Inject: true}
	return []QGRCase{{GR: gr, Q: fp8BF16, Short: true}, {GR: gr, Q: mxfp4, Short: true}, {GR: gr, Q: nvfp4}}
}

// fpPLECases: the PLE layer with a float-format table (head width 32: one ragged FP8 block
// column), key and value.
func fpPLECases(ple PLECase) []QPLECase {
	return []QPLECase{{PLE: ple, Q: fp8F32, Short: true}, {PLE: ple, Q: mxfp4}, {PLE: ple, Q: mxfp8}}
}

// fp8With and qfloatWith return copies of m whose format mut has changed (m is untouched).
func fp8With(m *op.Matrix, mut func(f *op.BlockFP8)) *op.Matrix {
	f := *m.FP8
	mut(&f)
	c := *m
	c.FP8 = &f
	return &c
}

func qfloatWith(m *op.Matrix, mut func(q *op.QuantFloat)) *op.Matrix {
	q := *m.QF
	mut(&q)
	c := *m
	c.QF = &q
	return &c
}

// fpBadMatMul is the bad-argument table of MatMul's float-format weights.
func fpBadMatMul() []badCase[op.MatMul] {
	f8, _, _ := RandFP8Block(3, 200, 64, op.BF16, 1) // scale grid [2, 1]
	f32, _, _ := RandFP8Block(4, 8, 130, op.F32, 1)  // scale grid [1, 2]
	nv, _, _ := RandQFloat(5, 4, 80, op.NVFP4, 1)
	w := func(m *op.Matrix) func(e *env, a *op.MatMul) { return func(e *env, a *op.MatMul) { a.W = m } }
	return []badCase[op.MatMul]{
		{"fp8_without_codes", errArg, w(&op.Matrix{N: 4, K: 64, DType: op.FP8Block})},
		{"fp8_short_codes", errShape, w(fp8With(f8, func(f *op.BlockFP8) { f.Codes = f.Codes[1:] }))},
		{"fp8_scale_grid_transposed", errShape, w(fp8With(f8, func(f *op.BlockFP8) { f.Grid = [2]int{1, 2} }))},
		{"fp8_scale_grid_not_ragged", errShape, w(fp8With(f32, func(f *op.BlockFP8) { f.Grid = [2]int{1, 1}; f.ScalesF32 = f.ScalesF32[:1] }))},
		{"fp8_short_scales", errShape, w(fp8With(f8, func(f *op.BlockFP8) { f.Scales = f.Scales[1:] }))},
		{"fp8_short_F32_scales", errShape, w(fp8With(f32, func(f *op.BlockFP8) { f.ScalesF32 = f.ScalesF32[1:] }))},
		{"fp8_scales_F16", errDType, w(fp8With(f8, func(f *op.BlockFP8) { f.ScaleDType = op.F16 }))},
		{"fp8_BF16_and_F32_scales", errArg, w(fp8With(f8, func(f *op.BlockFP8) { f.ScalesF32 = make([]float32, 2) }))},
		{"qfloat_without_codes", errArg, w(&op.Matrix{N: 4, K: 64, DType: op.QFloat})},
		{"qfloat_no_mode", errUnsupported, w(qfloatWith(nv, func(q *op.QuantFloat) { q.Mode = 0 }))},
		{"qfloat_mode_7", errUnsupported, w(qfloatWith(nv, func(q *op.QuantFloat) { q.Mode = 7 }))},
		{"qfloat_short_codes", errShape, w(qfloatWith(nv, func(q *op.QuantFloat) { q.Codes = q.Codes[1:] }))},
		{"qfloat_short_scales", errShape, w(qfloatWith(nv, func(q *op.QuantFloat) { q.Scales = q.Scales[1:] }))},
		{"qfloat_group_not_dividing_K", errShape, w(qfloatWith(nv, func(q *op.QuantFloat) { q.Mode = op.MXFP4 }))},
	}
}
