package kernels

import (
	"fmt"
	"math"
)

// MaxElems is the most elements one tensor of an op may have: 2^31 - 1. Offsets inside the
// Metal kernels and through the C ABI are 32-bit, and every backend accepts the same inputs, so
// the CPU backend rejects what the others would overflow on instead of computing a result no
// other backend can reproduce. Shapes beyond it return an error wrapping ErrShape that names
// the tensor.
const MaxElems = math.MaxInt32

// checkElems returns an error wrapping ErrShape when the product of dims (a tensor's shape)
// exceeds MaxElems or any dim is negative. It runs before length checks, so a shape whose
// product overflows int never reaches a slice length comparison.
func checkElems(op, tensor string, dims ...int) error {
	n := 1
	for _, d := range dims {
		if d < 0 {
			return fmt.Errorf("%s: %w: %s has a negative dimension in %v", op, ErrShape, tensor, dims)
		}
		if d != 0 && n > MaxElems/d {
			return fmt.Errorf("%s: %w: %s of shape %v exceeds %d elements (32-bit offsets)", op, ErrShape, tensor, dims, MaxElems)
		}
		n *= d
	}
	return nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
