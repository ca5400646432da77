package op

import "errors"

// Sentinel errors: the one family every layer of strata wraps (package strata re-exports them,
// the C ABI maps each onto one strata_status code). Ops return ErrShape, ErrDType and
// ErrInvalidArgument for bad input, checked before any work; backends return ErrBackend for a
// device or kernel failure and ErrUnsupported for a valid input they have no kernel for.
var (
	// ErrInvalidArgument: a value is out of range (HPG not dividing Hq, a slot row outside the
	// table, top-k larger than the expert count, an unknown mode, a nil weight, a token id
	// outside the vocabulary, an unknown backend name, ...).
	ErrInvalidArgument = errors.New("strata: invalid argument")
	// ErrShape: tensor lengths or dimensions do not match the op's contract (or exceed the
	// 32-bit offsets every backend computes with: MaxElems).
	ErrShape = errors.New("strata: shape mismatch")
	// ErrDType: a tensor or weight element type the op does not take.
	ErrDType = errors.New("strata: unsupported dtype")
	// ErrCapacity: a session's context (its MaxContext tokens) would be exceeded.
	ErrCapacity = errors.New("strata: context capacity exceeded")
	// ErrCheckpoint: a missing, corrupt, inconsistent or unsupported checkpoint or config.
	ErrCheckpoint = errors.New("strata: checkpoint error")
	// ErrUnsupported: a valid setting or format that strata does not run (named in the message).
	ErrUnsupported = errors.New("strata: unsupported")
	// ErrBackend: the requested backend or device is unavailable, or a kernel failed.
	ErrBackend = errors.New("strata: backend error")
	// ErrOutOfMemory: a buffer could not be allocated, or a call would need more memory than
	// is available (the message gives both byte counts).
	ErrOutOfMemory = errors.New("strata: out of memory")
	// ErrCancelled: the caller's context was cancelled; the session is unchanged.
	ErrCancelled = errors.New("strata: cancelled")
	// ErrBusy: a session is in use by another goroutine or thread.
	ErrBusy = errors.New("strata: session busy")
	// ErrClosed: the model or session was closed.
	ErrClosed = errors.New("strata: closed")
)
