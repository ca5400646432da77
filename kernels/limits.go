package kernels

import "github.com/stratakernels/strata/op"

// checkElems returns an error wrapping op.ErrShape when the product of dims (a tensor's shape)
// exceeds op.MaxElems (the 32-bit offsets every backend computes with) or any dim is negative.
func checkElems(opName, tensor string, dims ...int) error { return op.Elems(opName, tensor, dims...) }

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
