package optest

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// Quantized-weight cases: the ops that read weight matrices (MatMul, MoEExperts, Embed, GRRead,
// PLEApply) with op.QAffine weights, at every MLX bit width and group size, with BF16 and F16
// scales, ragged N and token counts around the 64-row tiles. The references compute with the
// dequantized values (Dequant: scale * q + bias per group, rounded once to float32), so a
// backend that dequantizes exactly has the dense cases' error. Their subtests are named
// "Op/q<bits>_g<group>_<scales>/<shape>"; Options.NoQuant skips them, and the float-format
// cases that each table ends with (cases_fp.go: op.FP8Block and op.QFloat). As in the dense
// tables, new cases are appended (seeds derive from a case's index).

// Quant is the quantization of a case's weights: Bits-bit codes in groups of Group inputs with
// ScaleDType (BF16 or F16) scales and biases (op.QAffine); with FP8 set, op.FP8Block with
// ScaleDType (BF16 or F32) block scales; with Mode set, op.QFloat in that MLX mode (cases_fp.go);
// with GG set, op.GGML blocks of that type (cases_ggml.go). The zero Quant means dense BF16
// weights (mixed cases keep some matrices dense).
type Quant struct {
	Bits, Group int
	ScaleDType  op.DType
	FP8         bool
	Mode        op.QuantMode
	GG          op.GGMLType
}

// Name is the quantization's part of a case name: "q4_g64_BF16", "fp8_BF16", "mxfp4", "ggml_Q4_K",
// or "BF16" for dense weights.
func (q Quant) Name() string {
	switch {
	case q.GG != 0:
		return "ggml_" + q.GG.String()
	case q.FP8:
		return "fp8_" + q.ScaleDType.String()
	case q.Mode != 0:
		return q.Mode.String()
	case q.Bits == 0:
		return "BF16"
	}
	return fmt.Sprintf("q%d_g%d_%v", q.Bits, q.Group, q.ScaleDType)
}

// matrix returns a weight [n, k] of the quantization (RandQuant, RandFP8Block, RandQFloat,
// RandGGML), or dense BF16 (RandMatrix) for the zero Quant, with values of order scale.
func (q Quant) matrix(t tb, seed uint64, n, k int, scale float32) *op.Matrix {
	t.Helper()
	var m *op.Matrix
	var err error
	switch {
	case q.GG != 0:
		m, _, err = RandGGML(seed, n, k, q.GG, scale)
	case q.FP8:
		m, _, err = RandFP8Block(seed, n, k, q.ScaleDType, scale)
	case q.Mode != 0:
		m, _, err = RandQFloat(seed, n, k, q.Mode, scale)
	case q.Bits == 0:
		return mustMatrix(t, seed, n, k, op.BF16, scale)
	default:
		m, _, err = RandQuant(seed, n, k, q.Bits, q.Group, q.ScaleDType, scale)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// allQuants is every bit width x group size with BF16 scales, then F16 scales at 4 and 3 bits.
func allQuants() []Quant {
	var qs []Quant
	for _, b := range op.QuantBits {
		for _, g := range op.QuantGroups {
			qs = append(qs, Quant{Bits: b, Group: g, ScaleDType: op.BF16})
		}
	}
	return append(qs, Quant{Bits: 4, Group: 64, ScaleDType: op.F16}, Quant{Bits: 3, Group: 32, ScaleDType: op.F16})
}

// shortQuant marks the quantizations of the Short subset: each bit width once, each group size
// and both scale dtypes at least once.
func shortQuant(q Quant) bool {
	switch q {
	case Quant{Bits: 2, Group: 128, ScaleDType: op.BF16}, Quant{Bits: 3, Group: 32, ScaleDType: op.F16}, Quant{Bits: 4, Group: 64, ScaleDType: op.BF16}, Quant{Bits: 5, Group: 64, ScaleDType: op.BF16},
		Quant{Bits: 6, Group: 32, ScaleDType: op.BF16}, Quant{Bits: 8, Group: 64, ScaleDType: op.BF16}, Quant{Bits: 4, Group: 64, ScaleDType: op.F16}:
		return true
	}
	return false
}

// QGEMMCase is MatMul with a QAffine weight [N, K].
type QGEMMCase struct {
	T, N, K int
	Q       Quant
	Short   bool
}

// Name is the case's subtest name.
func (c QGEMMCase) Name() string { return fmt.Sprintf("%s/T%d_N%d_K%d", c.Q.Name(), c.T, c.N, c.K) }

// QGEMMCases: every quantization at T = 1, 17, 65 over a ragged N (97) and K = 384 (3 groups of
// 128, 12 of 32), then K = 160 and 192 (groups of 32 and 64 only) and a K = 4096 weight whose
// row blocks do not divide N = 600, at 4 and 3 bits.
func QGEMMCases() []QGEMMCase {
	var cs []QGEMMCase
	for _, q := range allQuants() {
		for _, T := range []int{1, 17, 65} {
			cs = append(cs, QGEMMCase{T: T, N: 97, K: 384, Q: q, Short: shortQuant(q) && T != 17})
		}
	}
	cs = append(cs,
		QGEMMCase{T: 3, N: 64, K: 160, Q: Quant{Bits: 5, Group: 32, ScaleDType: op.BF16}, Short: true},
		QGEMMCase{T: 63, N: 33, K: 192, Q: Quant{Bits: 6, Group: 64, ScaleDType: op.F16}},
		QGEMMCase{T: 5, N: 600, K: 4096, Q: Quant{Bits: 4, Group: 64, ScaleDType: op.BF16}},
		QGEMMCase{T: 64, N: 600, K: 4096, Q: Quant{Bits: 3, Group: 128, ScaleDType: op.BF16}})
	return append(append(cs, fpGEMMCases()...), ggmlGEMMCases()...)
}

// QMoECase is MoEExperts with quantized experts: GateUp (fused, or with Split the gate and up
// projections apart as MLX's switch_mlp stores them) in Q, Up in UpQ (Split only) and Down in
// DownQ (the zero Quant: dense BF16, as a checkpoint whose down_proj input width the group size
// does not divide keeps it).
type QMoECase struct {
	T, E, K, D, I int
	Split         bool
	Q, UpQ, DownQ Quant
	EmptyEvery    int
	Short         bool
}

// Name is the case's subtest name.
func (c QMoECase) Name() string {
	return fmt.Sprintf("%s/T%d_E%d_K%d_D%d_I%d_split%v_up_%s_down_%s_empty%d", c.Q.Name(), c.T, c.E, c.K, c.D, c.I,
		c.Split, c.UpQ.Name(), c.DownQ.Name(), c.EmptyEvery)
}

// moe is the case as a MoECase (routing and slots).
func (c QMoECase) moe() MoECase {
	return MoECase{T: c.T, E: c.E, K: c.K, D: c.D, I: c.I, Norm: true, EmptyEvery: c.EmptyEvery}
}

// QMoECases: the tiny models' routing (12 experts, top-10, D 256) with split experts at every
// bit width (group 64, I 64), fused gate_up at groups 32 and 128, mixed precision (gate and up
// at other widths, a dense down), and a sparse routing at T = 65.
func QMoECases() []QMoECase {
	var cs []QMoECase
	for _, b := range op.QuantBits {
		q := Quant{Bits: b, Group: 64, ScaleDType: op.BF16}
		cs = append(cs, QMoECase{T: 17, E: 12, K: 10, D: 256, I: 64, Split: true, Q: q, UpQ: q, DownQ: q, EmptyEvery: 7, Short: b == 4 || b == 3})
	}
	q32, q128 := Quant{Bits: 4, Group: 32, ScaleDType: op.F16}, Quant{Bits: 8, Group: 128, ScaleDType: op.BF16}
	cs = append(cs,
		QMoECase{T: 3, E: 12, K: 10, D: 256, I: 64, Q: q32, DownQ: q32, Short: true},
		QMoECase{T: 17, E: 12, K: 10, D: 256, I: 128, Q: q128, DownQ: q128},
		QMoECase{T: 17, E: 12, K: 10, D: 256, I: 32, Split: true, Q: Quant{Bits: 3, Group: 64, ScaleDType: op.BF16}, UpQ: Quant{Bits: 6, Group: 32, ScaleDType: op.BF16}, EmptyEvery: 5, Short: true},
		QMoECase{T: 65, E: 64, K: 4, D: 128, I: 64, Split: true, Q: Quant{Bits: 2, Group: 32, ScaleDType: op.BF16}, UpQ: Quant{Bits: 2, Group: 32, ScaleDType: op.BF16}, DownQ: Quant{Bits: 5, Group: 64, ScaleDType: op.F16}, EmptyEvery: 5})
	return append(append(cs, fpMoECases()...), ggmlMoECases()...)
}

// QEmbedCase is Embed from a QAffine table [Vocab, D] into S streams.
type QEmbedCase struct {
	T, S, D, Vocab int
	Q              Quant
	Short          bool
}

// Name is the case's subtest name.
func (c QEmbedCase) Name() string {
	return fmt.Sprintf("%s/T%d_S%d_D%d_V%d", c.Q.Name(), c.T, c.S, c.D, c.Vocab)
}

// QEmbedCases: every quantization at 17 tokens of one stream (D 384), then 4 streams of 256.
func QEmbedCases() []QEmbedCase {
	var cs []QEmbedCase
	for _, q := range allQuants() {
		cs = append(cs, QEmbedCase{T: 17, S: 1, D: 384, Vocab: 50, Q: q, Short: shortQuant(q)})
	}
	cs = append(cs, QEmbedCase{T: 65, S: 4, D: 256, Vocab: 300, Q: Quant{Bits: 4, Group: 64, ScaleDType: op.BF16}, Short: true})
	return append(append(cs, fpEmbedCases()...), ggmlEmbedCases()...)
}

// QGRCase is GRRead with quantized Down [R, S*D], Up [S*D, R] and Inj [S, S*D] (R a multiple of
// the group size).
type QGRCase struct {
	GR    GRCase
	Q     Quant
	Short bool
}

// Name is the case's subtest name.
func (c QGRCase) Name() string { return c.Q.Name() + "/" + c.GR.Name() }

// QGRCases: the tiny qwen4exp shape (4 x 256) with rank 64 at every bit width in groups of 32
// and 64, and the mixer form.
func QGRCases() []QGRCase {
	var cs []QGRCase
	for _, b := range op.QuantBits {
		g := 32
		if b%2 == 0 {
			g = 64
		}
		cs = append(cs, QGRCase{GR: GRCase{T: 17, S: 4, D: 256, R: 64, Inject: true}, Q: Quant{Bits: b, Group: g, ScaleDType: op.BF16}, Short: b == 4})
	}
	cs = append(cs, QGRCase{GR: GRCase{T: 3, S: 4, D: 256, R: 64}, Q: Quant{Bits: 8, Group: 32, ScaleDType: op.F16}, Short: true})
	return append(append(cs, fpGRCases()...), ggmlGRCases()...)
}

// QPLECase is PLEApply with a quantized table [Rows, HeadDim] and Key, Value projections
// (HeadDim a multiple of the group size).
type QPLECase struct {
	PLE   PLECase
	Q     Quant
	Short bool
}

// Name is the case's subtest name.
func (c QPLECase) Name() string { return c.Q.Name() + "/" + c.PLE.Name() }

// QPLECases: 4 heads of 32 over 2 streams of 64, at 4 and 3 bits, with a chunked split.
func QPLECases() []QPLECase {
	ple := PLECase{T: 20, S: 2, D: 64, Heads: 4, HeadDim: 32, Rows: 300, ConvK: 4, Dilation: 3, Split: 7}
	cs := append([]QPLECase{{PLE: ple, Q: Quant{Bits: 4, Group: 32, ScaleDType: op.BF16}, Short: true}, {PLE: ple, Q: Quant{Bits: 3, Group: 32, ScaleDType: op.F16}}}, fpPLECases(ple)...)
	return append(cs, ggmlPLECases(ple)...)
}
