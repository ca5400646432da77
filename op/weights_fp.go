package op

import (
	"fmt"
	"slices"
)

// Weights stored as 8-bit and 4-bit floats, read in their packed form by the kernels (never
// widened at load): the block-scaled FP8 of the quant_method "fp8" releases (FP8Block) and MLX's
// floating-point quantization modes (QFloat). The element types are the OCP 8-bit and 4-bit
// floats:
//   - E4M3 (torch.float8_e4m3fn): bit 7 sign, bits 6..3 exponent e (bias 7), bits 2..0 mantissa
//     m; (-1)^sign * 2^(e-7) * (1 + m/8) for e > 0, (-1)^sign * m * 2^-9 for e = 0; no
//     infinities, 0x7f and 0xff are NaN, the largest finite magnitude is 448 (quantizers saturate
//     there, so files hold no NaN codes; mlx's decoder read 0x7f as 480 until its fix of
//     2026-08-23, "Fix mx.from_fp8 E4M3FN NaN decode").
//   - E2M1: bit 3 sign, bits 2..1 exponent, bit 0 mantissa; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6
//     for codes 0..7, codes 8..15 the same negated (8 is -0).
//   - E8M0 (scales only): 2^(s-127) as a float32, so s = 0 is the subnormal 2^-127 and s = 255 is
//     +Inf (mlx's fp8_e8m0 conversion to float; its quantizer never writes 255).
//   - nvfp4's scales are E4M3 bytes too, sign bit included (mlx's dequantize_scale).
// A weight element is code * scale, one float32 multiply (rounded once to nearest even; exact
// for every format but FP8Block with F32 scales, as both factors have few significant bits).

// FP8BlockSize is the edge of the square blocks that share one scale in an FP8Block weight:
// quantization_config weight_block_size [128, 128], the only block size the releases use.
const FP8BlockSize = 128

// BlockFP8 is an FP8Block weight [N, K]: E4M3 codes, row-major like the weight (safetensors
// dtype F8_E4M3, `<name>.weight`), and one scale per block of FP8BlockSize rows by
// FP8BlockSize inputs (`<name>.weight_scale_inv` [ceil(N/128), ceil(K/128)], row-major; the
// blocks of the last block row and column are ragged when 128 does not divide N or K). Element
// (i, j) is W[i, j] = e4m3(Codes[i*K + j]) * scale[i/128, j/128], the product rounded once to
// float32; activations stay float32 (transformers' FP8Linear on an accelerator also quantizes
// the activations per 128 inputs, activation_scheme "dynamic": strata does not). The scales are
// kept as stored: BF16 bits in Scales or float32 in ScalesF32, as ScaleDType says (the other one
// nil). Source: docs/FORMATS.md section 4 and transformers' integrations/finegrained_fp8.py
// (FP8Linear, weight_scale_inv of shape ceil(out / block) x ceil(in / block)).
type BlockFP8 struct {
	Codes      []uint8   // [N, K] E4M3 bit patterns
	ScaleDType DType     // BF16 or F32
	Scales     []uint16  // [Grid[0], Grid[1]] bfloat16 bits (ScaleDType BF16)
	ScalesF32  []float32 // [Grid[0], Grid[1]] (ScaleDType F32)
	// Grid is the scale tensor's shape as stored; it must be FP8Grid(N, K).
	Grid [2]int
}

// FP8Grid is the shape of the scale grid of an FP8Block weight [n, k]: [ceil(n/128), ceil(k/128)].
func FP8Grid(n, k int) [2]int {
	return [2]int{(n + FP8BlockSize - 1) / FP8BlockSize, (k + FP8BlockSize - 1) / FP8BlockSize}
}

// QuantMode is one of MLX's floating-point quantization modes (mlx.core.quantize mode
// "mxfp4", "nvfp4" or "mxfp8"). The zero value is no mode (refused by Validate).
type QuantMode int

const (
	// MXFP4 is E2M1 codes in groups of 32 with an E8M0 scale: w = e2m1(q) * 2^(s-127).
	MXFP4 QuantMode = iota + 1
	// NVFP4 is E2M1 codes in groups of 16 with an E4M3 scale: w = e2m1(q) * e4m3(s).
	NVFP4
	// MXFP8 is E4M3 codes in groups of 32 with an E8M0 scale: w = e4m3(q) * 2^(s-127).
	MXFP8
)

// QuantModes lists the modes of QFloat weights.
var QuantModes = []QuantMode{MXFP4, NVFP4, MXFP8}

// String is the mode's name in MLX's config.json ("mxfp4", "nvfp4", "mxfp8").
func (m QuantMode) String() string {
	switch m {
	case MXFP4:
		return "mxfp4"
	case NVFP4:
		return "nvfp4"
	case MXFP8:
		return "mxfp8"
	}
	return fmt.Sprintf("QuantMode(%d)", int(m))
}

// Bits is the width of the mode's codes: 4 (mxfp4, nvfp4) or 8 (mxfp8); 0 for an unknown mode.
func (m QuantMode) Bits() int {
	switch m {
	case MXFP4, NVFP4:
		return 4
	case MXFP8:
		return 8
	}
	return 0
}

// Group is the number of consecutive inputs sharing one scale: 32 (mxfp4, mxfp8) or 16 (nvfp4);
// 0 for an unknown mode. mlx fixes it per mode (fp_quantize refuses any other group size).
func (m QuantMode) Group() int {
	switch m {
	case MXFP4, MXFP8:
		return 32
	case NVFP4:
		return 16
	}
	return 0
}

// QuantFloat is a QFloat weight [N, K] in MLX's floating-point mode Mode (mlx.core.quantize;
// MLX's QuantizedLinear and QuantizedEmbedding keep `<path>.weight` U32 and `<path>.scales` U8,
// no biases). Row n holds K codes of Mode.Bits() bits packed into K*Bits/32 little-endian uint32
// words, element i of a word at bits [i*Bits, (i+1)*Bits) (low nibble first for 4 bits; for
// 8 bits the codes are the row's bytes in memory order), and one 8-bit scale per group of
// Mode.Group() inputs: E8M0 for mxfp4 and mxfp8, E4M3 for nvfp4. Element i of row n is
// w = decode(code) * decode(Scales[n*K/Group + i/Group]), the product rounded to float32 (exact
// but for overflow and underflow). nvfp4's optional tensor-wide global scale (mlx's
// global_scale, used by QQLinear's quantized activations) is not part of a weight-only
// checkpoint and not taken. Source: mlx (main of 2026-08-22) mlx/ops.cpp (fp_quantize,
// fp_dequantize: the fixed group sizes and bits, the packing, the E2M1 table) and
// mlx/backend/metal/kernels/fp4.h, fp8.h, fp_quantized.h (the element and scale decoders,
// dequantize_scale: E4M3 scales for groups of 16, E8M0 otherwise).
type QuantFloat struct {
	Mode   QuantMode
	Codes  []uint32 // [N, K*Bits/32]
	Scales []uint8  // [N, K/Group]: E8M0 (mxfp4, mxfp8) or E4M3 (nvfp4) bit patterns
}

// NewMatrixFP8Block wraps f (not copied: the codes and scales may be views of a mapped file) as
// an FP8Block Matrix [n, k]. Errors wrap ErrShape, ErrDType or ErrInvalidArgument (Validate).
func NewMatrixFP8Block(n, k int, f *BlockFP8) (*Matrix, error) {
	m := &Matrix{N: n, K: k, DType: FP8Block, FP8: f}
	return m, m.Validate("NewMatrixFP8Block")
}

// NewMatrixQFloat wraps q (not copied) as a QFloat Matrix [n, k]. Errors wrap ErrShape,
// ErrUnsupported (an unknown mode) or ErrInvalidArgument (Validate).
func NewMatrixQFloat(n, k int, q *QuantFloat) (*Matrix, error) {
	m := &Matrix{N: n, K: k, DType: QFloat, QF: q}
	return m, m.Validate("NewMatrixQFloat")
}

func (f *BlockFP8) validate(op string, N, K int) error {
	if f == nil {
		return fmt.Errorf("%s: %w: FP8Block weight [%d, %d] without its codes", op, ErrInvalidArgument, N, K)
	}
	if len(f.Codes) != N*K {
		return fmt.Errorf("%s: %w: FP8Block weight [%d, %d] has %d codes", op, ErrShape, N, K, len(f.Codes))
	}
	want := FP8Grid(N, K)
	if f.Grid != want {
		return fmt.Errorf("%s: %w: FP8Block weight [%d, %d] has a scale grid of shape %v, want %v (one scale per %d x %d block, ragged edges included)",
			op, ErrShape, N, K, f.Grid, want, FP8BlockSize, FP8BlockSize)
	}
	n := want[0] * want[1]
	switch f.ScaleDType {
	case BF16:
		if f.ScalesF32 != nil {
			return fmt.Errorf("%s: %w: FP8Block weight [%d, %d] with BF16 scales also has F32 ones", op, ErrInvalidArgument, N, K)
		}
		if len(f.Scales) != n {
			return fmt.Errorf("%s: %w: FP8Block weight [%d, %d] has %d BF16 scales for its scale grid %v", op, ErrShape, N, K, len(f.Scales), want)
		}
	case F32:
		if f.Scales != nil {
			return fmt.Errorf("%s: %w: FP8Block weight [%d, %d] with F32 scales also has BF16 ones", op, ErrInvalidArgument, N, K)
		}
		if len(f.ScalesF32) != n {
			return fmt.Errorf("%s: %w: FP8Block weight [%d, %d] has %d F32 scales for its scale grid %v", op, ErrShape, N, K, len(f.ScalesF32), want)
		}
	default:
		return fmt.Errorf("%s: %w: FP8Block weight [%d, %d] with %v scales (want BF16 or F32)", op, ErrDType, N, K, f.ScaleDType)
	}
	return nil
}

func (q *QuantFloat) validate(op string, N, K int) error {
	if q == nil {
		return fmt.Errorf("%s: %w: QFloat weight [%d, %d] without its codes", op, ErrInvalidArgument, N, K)
	}
	if !slices.Contains(QuantModes, q.Mode) {
		return fmt.Errorf("%s: %w: QFloat weight [%d, %d] in mode %v (want one of %v)", op, ErrUnsupported, N, K, q.Mode, QuantModes)
	}
	bits, g := q.Mode.Bits(), q.Mode.Group()
	if K%g != 0 {
		return fmt.Errorf("%s: %w: %v weight [%d, %d]: the group size %d does not divide K", op, ErrShape, q.Mode, N, K, g)
	}
	if words := N * (K * bits / 32); len(q.Codes) != words {
		return fmt.Errorf("%s: %w: %v weight [%d, %d] has %d code words, want %d", op, ErrShape, q.Mode, N, K, len(q.Codes), words)
	}
	if n := N * (K / g); len(q.Scales) != n {
		return fmt.Errorf("%s: %w: %v weight [%d, %d] has %d scales, want %d (one per %d inputs)", op, ErrShape, q.Mode, N, K, len(q.Scales), n, g)
	}
	return nil
}

// bytes is the weight's data in memory: codes and scales.
func (f *BlockFP8) bytes() int64 {
	if f == nil {
		return 0
	}
	return int64(len(f.Codes)) + 2*int64(len(f.Scales)) + 4*int64(len(f.ScalesF32))
}

func (q *QuantFloat) bytes() int64 {
	if q == nil {
		return 0
	}
	return 4*int64(len(q.Codes)) + int64(len(q.Scales))
}
