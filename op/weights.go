package op

import (
	"fmt"
	"math"
	"slices"
)

// Matrix is a weight W [N, K], row-major, as transformers' nn.Linear stores it (out_features
// N, in_features K). F32 weights live in F32; BF16 and F16 weights keep their 16-bit patterns in
// U16 (zero-copy on a checkpoint's memory mapping) and are widened to float32 exactly where they
// are used; QAffine, FP8Block and QFloat weights keep their packed form in Q, FP8 and QF and are
// dequantized inside the kernels that read them (never at load). A Matrix is described once per
// model and uploaded by each backend once (Backend.NewWeights), keyed by its address: do not
// modify it after use.
type Matrix struct {
	N, K  int
	DType DType
	F32   []float32
	U16   []uint16
	Q     *Quant      // DType QAffine
	FP8   *BlockFP8   // DType FP8Block (weights_fp.go)
	QF    *QuantFloat // DType QFloat (weights_fp.go)
	GG    *GGMLBlocks // DType GGML (weights_ggml.go)
	// Compute is the backend's form of this matrix for a compute mode other than f32, set on
	// the copy Weights.Prepare returns (the CPU's int8 or bf16 operands; WeightOptions.Compute);
	// nil: the products read the fields above in float32.
	Compute ComputeForm
}

// Quant is an MLX affine-quantized weight [N, K] (mlx.core.quantize, mode "affine"): row n holds
// K codes q of Bits bits packed into a little-endian bit stream of K*Bits/32 uint32 words, least
// significant bit first (bit b of element i is bit (i*Bits + b) % 32 of word (i*Bits + b) / 32,
// so 3-, 5- and 6-bit codes straddle words); element i of row n is
// w = Scales[n, i/Group] * q + Biases[n, i/Group], scales and biases in ScaleDType (BF16 or F16),
// the scale possibly negative and the bias not a minimum: the formula is applied as it is.
// Source: docs/FORMATS.md section 2 and mlx's quantized.h.
type Quant struct {
	Bits, Group    int
	Codes          []uint32 // [N, K*Bits/32]
	Scales, Biases []uint16 // [N, K/Group], bits of ScaleDType
	ScaleDType     DType    // BF16 or F16
}

// QuantBits and QuantGroups are the bit widths and group sizes of MLX's affine mode.
var (
	QuantBits   = []int{2, 3, 4, 5, 6, 8}
	QuantGroups = []int{32, 64, 128}
)

// NewMatrixF32 wraps data (length n*k, not copied) as an F32 Matrix [n, k].
// Errors wrap ErrShape.
func NewMatrixF32(n, k int, data []float32) (*Matrix, error) {
	m := &Matrix{N: n, K: k, DType: F32, F32: data}
	return m, m.Validate("NewMatrixF32")
}

// NewMatrixU16 wraps bits (length n*k, not copied) as a BF16 or F16 Matrix [n, k].
// Errors wrap ErrShape, or ErrDType when dt is not BF16/F16.
func NewMatrixU16(n, k int, dt DType, bits []uint16) (*Matrix, error) {
	m := &Matrix{N: n, K: k, DType: dt, U16: bits}
	return m, m.Validate("NewMatrixU16")
}

// Validate checks the Matrix's sizes against its storage (op names the caller in the error).
// Errors wrap ErrInvalidArgument (nil), ErrShape or ErrDType.
func (m *Matrix) Validate(op string) error {
	if m == nil {
		return fmt.Errorf("%s: %w: nil weight matrix", op, ErrInvalidArgument)
	}
	if m.N <= 0 || m.K <= 0 || m.N > math.MaxInt32 || m.K > math.MaxInt32 {
		return fmt.Errorf("%s: %w: weight [%d, %d]", op, ErrShape, m.N, m.K)
	}
	if err := checkElems(op, "weight", m.N, m.K); err != nil {
		return err
	}
	switch m.DType {
	case F32:
		if len(m.F32) != m.N*m.K {
			return fmt.Errorf("%s: %w: F32 weight [%d, %d] has %d elements", op, ErrShape, m.N, m.K, len(m.F32))
		}
	case BF16, F16:
		if len(m.U16) != m.N*m.K {
			return fmt.Errorf("%s: %w: %v weight [%d, %d] has %d elements", op, ErrShape, m.DType, m.N, m.K, len(m.U16))
		}
	case QAffine:
		return m.Q.validate(op, m.N, m.K)
	case FP8Block:
		return m.FP8.validate(op, m.N, m.K)
	case QFloat:
		return m.QF.validate(op, m.N, m.K)
	case GGML:
		return m.GG.validate(op, m.N, m.K)
	default:
		return fmt.Errorf("%s: %w: %v weight (want F32, BF16, F16, QAffine, FP8Block, QFloat or GGML)", op, ErrDType, m.DType)
	}
	return nil
}

func (q *Quant) validate(op string, N, K int) error {
	if q == nil {
		return fmt.Errorf("%s: %w: QAffine weight [%d, %d] without its codes", op, ErrInvalidArgument, N, K)
	}
	if !slices.Contains(QuantBits, q.Bits) || !slices.Contains(QuantGroups, q.Group) {
		return fmt.Errorf("%s: %w: %d-bit codes in groups of %d (want bits %v, groups %v)", op, ErrUnsupported, q.Bits, q.Group, QuantBits, QuantGroups)
	}
	if K%q.Group != 0 {
		return fmt.Errorf("%s: %w: group size %d does not divide K=%d", op, ErrShape, q.Group, K)
	}
	if q.ScaleDType != BF16 && q.ScaleDType != F16 {
		return fmt.Errorf("%s: %w: %v scales (want BF16 or F16)", op, ErrDType, q.ScaleDType)
	}
	if words := N * (K * q.Bits / 32); len(q.Codes) != words || K*q.Bits%32 != 0 {
		return fmt.Errorf("%s: %w: %d-bit weight [%d, %d] has %d code words, want %d", op, ErrShape, q.Bits, N, K, len(q.Codes), words)
	}
	if g := N * (K / q.Group); len(q.Scales) != g || len(q.Biases) != g {
		return fmt.Errorf("%s: %w: weight [%d, %d] in groups of %d has %d scales and %d biases, want %d", op, ErrShape, N, K, q.Group, len(q.Scales), len(q.Biases), g)
	}
	return nil
}

// format names the matrix's dtype with what else its kind of packing fixes: the bits, group
// size and scale dtype of a QAffine weight, the scale dtype of an FP8Block one, the mode of a
// QFloat one.
func (m *Matrix) format() string {
	switch m.DType {
	case QAffine:
		return fmt.Sprintf("%v %d-bit groups of %d, %v scales", m.DType, m.Q.Bits, m.Q.Group, m.Q.ScaleDType)
	case FP8Block:
		return fmt.Sprintf("%v, %v scales", m.DType, m.FP8.ScaleDType)
	case QFloat:
		return fmt.Sprintf("%v %v", m.DType, m.QF.Mode)
	case GGML:
		return fmt.Sprintf("%v %v", m.DType, m.GG.Type)
	}
	return m.DType.String()
}

// Bytes is the size of the weight's data in memory (codes, scales and biases for QAffine; codes
// and scales for FP8Block and QFloat): what it keeps resident, as its slices view the file.
func (m *Matrix) Bytes() int64 {
	switch m.DType {
	case F32:
		return 4 * int64(len(m.F32))
	case QAffine:
		return 4*int64(len(m.Q.Codes)) + 2*int64(len(m.Q.Scales)+len(m.Q.Biases))
	case FP8Block:
		return m.FP8.bytes()
	case QFloat:
		return m.QF.bytes()
	case GGML:
		return m.GG.bytes()
	}
	return 2 * int64(len(m.U16))
}

// Experts holds one MoE layer's routed experts: E experts of hidden size D and intermediate
// size I. GateUp[e] is [2I, D] with the gate rows first (transformers' fused
// experts.gate_up_proj[e]; published per-expert files concatenate gate_proj then up_proj),
// Down[e] is [D, I] (experts.down_proj[e]). With Up set, the gate and up projections are kept
// apart instead: GateUp[e] is the gate alone, [I, D], and Up[e] is [I, D] (MLX's
// switch_mlp.gate_proj / up_proj, whose quantized codes stay views of the file this way).
// Weights may be F32, BF16, F16, QAffine, FP8Block or QFloat, each matrix in its own dtype.
type Experts struct {
	E, D, I int
	GateUp  []*Matrix
	Up      []*Matrix // nil: GateUp holds gate and up rows
	Down    []*Matrix
}

// Split reports whether the gate and up projections are separate matrices (Up set).
func (ex *Experts) Split() bool { return ex.Up != nil }

// Validate checks the experts' counts and every matrix's shape. Errors wrap
// ErrInvalidArgument, ErrShape or ErrDType.
func (ex *Experts) Validate(op string) error {
	if ex == nil {
		return fmt.Errorf("%s: %w: nil experts", op, ErrInvalidArgument)
	}
	if ex.E <= 0 || ex.D <= 0 || ex.I <= 0 || len(ex.GateUp) != ex.E || len(ex.Down) != ex.E || (ex.Up != nil && len(ex.Up) != ex.E) {
		return fmt.Errorf("%s: %w: E=%d D=%d I=%d with %d gate_up, %d up and %d down matrices",
			op, ErrShape, ex.E, ex.D, ex.I, len(ex.GateUp), len(ex.Up), len(ex.Down))
	}
	gateRows := 2 * ex.I
	if ex.Split() {
		gateRows = ex.I
	}
	for e := 0; e < ex.E; e++ {
		if err := ex.GateUp[e].Validate(op); err != nil {
			return fmt.Errorf("expert %d gate_up: %w", e, err)
		}
		if err := ex.Down[e].Validate(op); err != nil {
			return fmt.Errorf("expert %d down: %w", e, err)
		}
		if gu, dn := ex.GateUp[e], ex.Down[e]; gu.N != gateRows || gu.K != ex.D || dn.N != ex.D || dn.K != ex.I {
			return fmt.Errorf("%s: %w: expert %d gate_up [%d, %d] (want [%d, %d]), down [%d, %d] (want [%d, %d])",
				op, ErrShape, e, gu.N, gu.K, gateRows, ex.D, dn.N, dn.K, ex.D, ex.I)
		}
		if ex.Split() {
			if err := ex.Up[e].Validate(op); err != nil {
				return fmt.Errorf("expert %d up: %w", e, err)
			}
			if up := ex.Up[e]; up.N != ex.I || up.K != ex.D {
				return fmt.Errorf("%s: %w: expert %d up [%d, %d] (want [%d, %d])", op, ErrShape, e, up.N, up.K, ex.I, ex.D)
			}
		}
	}
	return nil
}

// GRWeights is one GatedResidual (hyper-connection) module of qwen4_exp for S streams of D
// with low rank R: Norm [S*D] (hc_norm, grouped RMSNorm1p per stream), Down [R, S*D]
// (input_mix_weight_down), Up [S*D, R] (input_mix_weight_up) and Inj [S, S*D]
// (block_inject_weight; nil for the final read-only hyper_connection_mixer).
type GRWeights struct {
	S, D, R int
	Norm    []float32
	Down    *Matrix
	Up      *Matrix
	Inj     *Matrix
}

// Validate checks the module's shapes. Errors wrap ErrInvalidArgument, ErrShape or ErrDType.
func (g *GRWeights) Validate(op string) error {
	if g == nil {
		return fmt.Errorf("%s: %w: nil GatedResidual weights", op, ErrInvalidArgument)
	}
	S, D, R := g.S, g.D, g.R
	if S <= 0 || D <= 0 || R <= 0 || len(g.Norm) != S*D {
		return fmt.Errorf("%s: %w: S=%d D=%d R=%d len(Norm)=%d", op, ErrShape, S, D, R, len(g.Norm))
	}
	for _, m := range []*Matrix{g.Down, g.Up} {
		if err := m.Validate(op); err != nil {
			return err
		}
	}
	if g.Down.N != R || g.Down.K != S*D || g.Up.N != S*D || g.Up.K != R {
		return fmt.Errorf("%s: %w: down [%d, %d] (want [%d, %d]), up [%d, %d] (want [%d, %d])",
			op, ErrShape, g.Down.N, g.Down.K, R, S*D, g.Up.N, g.Up.K, S*D, R)
	}
	if g.Inj != nil {
		if err := g.Inj.Validate(op); err != nil {
			return err
		}
		if g.Inj.N != S || g.Inj.K != S*D {
			return fmt.Errorf("%s: %w: inject [%d, %d] (want [%d, %d])", op, ErrShape, g.Inj.N, g.Inj.K, S, S*D)
		}
	}
	return nil
}

// PLEWeights is one qwen4_exp PLE layer (Qwen4ExpTextPLELayer) for S streams of D:
// Table [rows, HeadDim] (ple_embedding.ngram_embedding.weight; EmbedDim = Heads*HeadDim; nil
// when the table comes split, PLEApply.Parts),
// Key [S*D, EmbedDim] (key_proj), Value [D, EmbedDim] (value_proj), NormKey, NormQuery,
// NormConv [S*D] (grouped RMSNorm1p weights), ConvW [S*D, ConvK] (conv1d.weight [S*D, 1, ConvK],
// depthwise, no bias; ConvK = len(ConvW)/(S*D), 4 in the models) and Dilation (= ngram_size, 3).
type PLEWeights struct {
	S, D, EmbedDim, HeadDim int
	Table                   *Matrix
	Key                     *Matrix
	Value                   *Matrix
	NormKey                 []float32
	NormQuery               []float32
	NormConv                []float32
	ConvW                   []float32
	Dilation                int
}

// ConvK is the depthwise conv kernel size, 0 when ConvW does not hold whole rows.
func (w *PLEWeights) ConvK() int {
	if w.S <= 0 || w.D <= 0 || len(w.ConvW)%(w.S*w.D) != 0 {
		return 0
	}
	return len(w.ConvW) / (w.S * w.D)
}

// ConvStateLen is the number of float32 in the carried conv state: (ConvK-1)*Dilation steps of
// S*D channels (9 x S*D in the models).
func (w *PLEWeights) ConvStateLen() int { return (w.ConvK() - 1) * w.Dilation * w.S * w.D }

// Heads is the number of n-gram heads (EmbedDim / HeadDim).
func (w *PLEWeights) Heads() int { return w.EmbedDim / w.HeadDim }

// Validate checks the layer's shapes. Errors wrap ErrInvalidArgument, ErrShape or ErrDType.
func (w *PLEWeights) Validate(op string) error {
	if w == nil {
		return fmt.Errorf("%s: %w: nil PLE weights", op, ErrInvalidArgument)
	}
	S, D, E, Hd := w.S, w.D, w.EmbedDim, w.HeadDim
	if S <= 0 || D <= 0 || E <= 0 || Hd <= 0 || E%Hd != 0 || w.Dilation <= 0 || w.ConvK() < 1 ||
		len(w.NormKey) != S*D || len(w.NormQuery) != S*D || len(w.NormConv) != S*D {
		return fmt.Errorf("%s: %w: S=%d D=%d EmbedDim=%d HeadDim=%d dilation=%d len(ConvW)=%d norms %d/%d/%d",
			op, ErrShape, S, D, E, Hd, w.Dilation, len(w.ConvW), len(w.NormKey), len(w.NormQuery), len(w.NormConv))
	}
	for _, m := range []*Matrix{w.Key, w.Value} {
		if err := m.Validate(op); err != nil {
			return err
		}
	}
	if w.Table != nil {
		if err := w.Table.Validate(op); err != nil {
			return err
		}
		if w.Table.K != Hd {
			return fmt.Errorf("%s: %w: table [%d, %d], want [*, %d]", op, ErrShape, w.Table.N, w.Table.K, Hd)
		}
	}
	if w.Key.N != S*D || w.Key.K != E || w.Value.N != D || w.Value.K != E {
		return fmt.Errorf("%s: %w: key [%d, %d] (want [%d, %d]), value [%d, %d] (want [%d, %d])",
			op, ErrShape, w.Key.N, w.Key.K, S*D, E, w.Value.N, w.Value.K, D, E)
	}
	return nil
}
