package op

import "fmt"

// ComputeMode is the arithmetic of a model's linear-layer products (WeightOptions.Compute),
// chosen at load. The CPU backend runs the non-default modes through package internal/qdot; the
// Metal backend runs ComputeF32 only.
type ComputeMode uint8

const (
	// ComputeF32 (the default): activations, dequantized or widened weights and sums in
	// float32, as the f32 GEMMs run them.
	ComputeF32 ComputeMode = iota
	// ComputeBF16: activations rounded to bfloat16, weights as bfloat16 (BF16 as stored, FP8
	// decoded exactly, MLX affine dequantized and rounded), pairwise float32 sums in the order
	// of x86's VDPBF16PS.
	ComputeBF16
	// ComputeInt8: activations quantized per row and block of 32 to int8 with a float32
	// scale, MLX affine and FP8 codes used as integers with their scales, int32 sums.
	ComputeInt8
)

// ComputeModes are the modes' names, in the order of their values.
var ComputeModes = []string{"f32", "bf16", "int8"}

// String names the mode: "f32", "bf16" or "int8".
func (c ComputeMode) String() string {
	if int(c) < len(ComputeModes) {
		return ComputeModes[c]
	}
	return fmt.Sprintf("ComputeMode(%d)", uint8(c))
}

// ParseComputeMode returns the mode named s ("f32", "bf16" or "int8"; "" is f32). Errors wrap
// ErrInvalidArgument and name s.
func ParseComputeMode(s string) (ComputeMode, error) {
	if s == "" {
		return ComputeF32, nil
	}
	for i, n := range ComputeModes {
		if s == n {
			return ComputeMode(i), nil
		}
	}
	return 0, fmt.Errorf("%w: compute mode %q (want f32, bf16 or int8)", ErrInvalidArgument, s)
}

// Valid reports an error (wrapping ErrInvalidArgument) for a value outside the modes.
func (c ComputeMode) Valid() error {
	if int(c) >= len(ComputeModes) {
		return fmt.Errorf("%w: %v (want f32, bf16 or int8)", ErrInvalidArgument, c)
	}
	return nil
}

// ComputeForm is a backend's form of a weight matrix for a compute mode other than f32
// (Matrix.Compute, set by Weights.Prepare): e.g. the CPU's int8 operand of an MLX weight.
type ComputeForm interface {
	// Bytes is the memory the form holds beyond the matrix's own data.
	Bytes() int64
	// Packed reports whether the form holds the matrix's values itself (in Bytes), so that its
	// products do not read the matrix's data: a mapped file's pages of it need not stay
	// resident.
	Packed() bool
	// String names the form's mode, kernel and the weight it came from, for reports.
	String() string
}
