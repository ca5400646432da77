package op

import "fmt"

// DType is the element type of a tensor or a weight.
type DType int

const (
	// F32 is IEEE float32 (activations, states, float32 weights in Matrix.F32).
	F32 DType = iota
	// BF16 is bfloat16 (the upper 16 bits of a float32), stored as bits in Matrix.U16.
	BF16
	// F16 is IEEE half precision, stored as bits in Matrix.U16.
	F16
	// I32 is a 32-bit signed integer (token ids, expert indices, slot rows, selections).
	I32
	// QAffine is a weight quantized as MLX's affine mode (Matrix.Q): packed unsigned codes of
	// Quant.Bits bits with a scale and a bias per group of Quant.Group inputs.
	QAffine
	// FP8Block is a weight of 8-bit floats (E4M3) with one scale per 128 x 128 block (Matrix.FP8:
	// the quant_method "fp8" releases).
	FP8Block
	// QFloat is a weight quantized in one of MLX's floating-point modes (Matrix.QF: mxfp4, nvfp4,
	// mxfp8): packed float codes with one 8-bit float scale per group, no biases.
	QFloat
	// GGML is a weight in one of the block-quantized types of the GGUF format (Matrix.GG:
	// llama.cpp's Q4_0 ... Q6_K, IQ4_NL, IQ4_XS, MXFP4), kept as the file stores its blocks.
	GGML
)

// String names the dtype as safetensors does.
func (d DType) String() string {
	switch d {
	case F32:
		return "F32"
	case BF16:
		return "BF16"
	case F16:
		return "F16"
	case I32:
		return "I32"
	case QAffine:
		return "QAffine"
	case FP8Block:
		return "FP8Block"
	case QFloat:
		return "QFloat"
	case GGML:
		return "GGML"
	}
	return fmt.Sprintf("DType(%d)", int(d))
}
