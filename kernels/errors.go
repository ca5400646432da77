package kernels

import "errors"

// Sentinel errors of the CPU backend. Every error an op returns wraps one of them, with the
// op name and the offending sizes in the message.
var (
	// ErrShape: slice lengths or dimensions do not match the op's contract.
	ErrShape = errors.New("kernels: shape mismatch")
	// ErrArg: an argument value is out of range (HPG not dividing Hq, slot row out of range,
	// top-k larger than the expert count, unknown mode, ...).
	ErrArg = errors.New("kernels: invalid argument")
	// ErrDType: a weight or tensor element type the op does not support.
	ErrDType = errors.New("kernels: unsupported dtype")
)
