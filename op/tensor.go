package op

import (
	"fmt"
	"math"
)

// MaxElems is the most elements one tensor of an op may have: 2^31 - 1. Offsets inside the
// Metal kernels and through the C ABI are 32-bit, and every backend accepts the same inputs, so
// shapes beyond it are refused (ErrShape, naming the tensor) instead of computing a result
// another backend could not reproduce.
const MaxElems = math.MaxInt32

// Tensor is a range of Len elements of DType (F32 or I32: 4 bytes each) in a backend's memory:
// the activations, caches and states of a prefill. Backends allocate their own (Backend.NewTensor,
// Scratch.Tensor) and ops of a Pass take only the tensors of that Pass's backend. Host memory
// wrapped by HostF32 / HostI32 is the CPU backend's tensor type.
//
// F32 and I32 are host views of the elements (nil when the dtype differs or Len is 0). On the
// CPU they are the memory itself; on Metal they alias shared storage (unified memory, no copy).
// Read or write them only while no Pass that uses the tensor is in flight: encoded work of a
// Metal Pass runs at Commit.
type Tensor interface {
	DType() DType
	Len() int
	F32() []float32
	I32() []int32
	// Slice is elements [lo, hi) of the same memory; it panics on a range outside the tensor,
	// as a Go slice expression does.
	Slice(lo, hi int) Tensor
}

// Host is a Tensor over Go memory: the CPU backend's tensors, and callers' slices wrapped for
// the op entry points.
type Host struct {
	dt DType
	f  []float32
	i  []int32
}

// HostF32 wraps x (not copied) as an F32 tensor of len(x) elements.
func HostF32(x []float32) *Host { return &Host{dt: F32, f: x} }

// HostI32 wraps x (not copied) as an I32 tensor of len(x) elements.
func HostI32(x []int32) *Host { return &Host{dt: I32, i: x} }

// DType implements Tensor.
func (h *Host) DType() DType { return h.dt }

// Len implements Tensor.
func (h *Host) Len() int {
	if h.dt == I32 {
		return len(h.i)
	}
	return len(h.f)
}

// F32 implements Tensor.
func (h *Host) F32() []float32 { return h.f }

// I32 implements Tensor.
func (h *Host) I32() []int32 { return h.i }

// Slice implements Tensor.
func (h *Host) Slice(lo, hi int) Tensor {
	if h.dt == I32 {
		return &Host{dt: I32, i: h.i[lo:hi:hi]}
	}
	return &Host{dt: F32, f: h.f[lo:hi:hi]}
}

// checkElems returns an error wrapping ErrShape when the product of dims (a tensor's shape)
// exceeds MaxElems or a dim is negative. It runs before length checks, so a shape whose product
// overflows int never reaches a length comparison.
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

// Elems is checkElems for callers outside the package (capi, strata): nil when the product of
// dims fits MaxElems, else an error wrapping ErrShape naming the tensor.
func Elems(op, tensor string, dims ...int) error { return checkElems(op, tensor, dims...) }

// Present reports whether an optional tensor argument is given: nil and typed-nil tensors
// (a nil *Host, a backend's nil pointer) are absent.
func Present(t Tensor) bool {
	if t == nil {
		return false
	}
	if h, ok := t.(*Host); ok {
		return h != nil
	}
	if n, ok := t.(interface{ IsNil() bool }); ok {
		return !n.IsNil()
	}
	return true
}

// need checks that tensor t (named name) is present, of dtype dt and exactly n elements long.
func need(op, name string, t Tensor, dt DType, n int) error {
	if !Present(t) {
		return fmt.Errorf("%s: %w: %s is missing", op, ErrInvalidArgument, name)
	}
	if t.DType() != dt {
		return fmt.Errorf("%s: %w: %s is %v, want %v", op, ErrDType, name, t.DType(), dt)
	}
	if t.Len() != n {
		return fmt.Errorf("%s: %w: len(%s)=%d, want %d", op, ErrShape, name, t.Len(), n)
	}
	return nil
}

// needAtLeast is need for caches: t must hold at least n elements (later rows are not read).
func needAtLeast(op, name string, t Tensor, dt DType, n int) error {
	if !Present(t) {
		return fmt.Errorf("%s: %w: %s is missing", op, ErrInvalidArgument, name)
	}
	if t.DType() != dt {
		return fmt.Errorf("%s: %w: %s is %v, want %v", op, ErrDType, name, t.DType(), dt)
	}
	if t.Len() < n {
		return fmt.Errorf("%s: %w: len(%s)=%d, want at least %d", op, ErrShape, name, t.Len(), n)
	}
	return nil
}

// needVec checks a weight vector's length.
func needVec(op, name string, w []float32, n int) error {
	if len(w) != n {
		return fmt.Errorf("%s: %w: len(%s)=%d, want %d", op, ErrShape, name, len(w), n)
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

// checkEps refuses a negative or NaN epsilon.
func checkEps(op string, eps float32) error {
	if !(eps >= 0) || math.IsInf(float64(eps), 0) {
		return fmt.Errorf("%s: %w: eps=%g", op, ErrInvalidArgument, eps)
	}
	return nil
}
