package strata

import (
	"errors"
	"fmt"

	"github.com/stratakernels/strata/op"
)

// Sentinel errors: the one family of package op, re-exported. Every error strata returns wraps
// exactly one of them (test with errors.Is); the C ABI maps them 1:1 onto strata_status codes.
var (
	// ErrInvalidArgument: a value is out of range (token id >= vocab or < 0, empty prompt,
	// unknown backend name, nil receiver, bad option).
	ErrInvalidArgument = op.ErrInvalidArgument
	// ErrShape: tensor shapes or lengths do not match.
	ErrShape = op.ErrShape
	// ErrDType: an unsupported element type.
	ErrDType = op.ErrDType
	// ErrCapacity: the session's context (max context tokens) would be exceeded.
	ErrCapacity = op.ErrCapacity
	// ErrCheckpoint: a missing, corrupt or inconsistent checkpoint or config.
	ErrCheckpoint = op.ErrCheckpoint
	// ErrUnsupported: a valid setting, format or shape that strata does not run (named in the
	// message): a quantization method, a model type, a shape a backend's kernels do not take.
	ErrUnsupported = op.ErrUnsupported
	// ErrBackend: the requested backend or device is unavailable, or a kernel failed.
	ErrBackend = op.ErrBackend
	// ErrOutOfMemory: a buffer could not be allocated, or a call would need more memory than is
	// available (the message gives both byte counts).
	ErrOutOfMemory = op.ErrOutOfMemory
	// ErrCancelled: the context was cancelled; the session is unchanged.
	ErrCancelled = op.ErrCancelled
	// ErrBusy: the session is in use by another goroutine or thread.
	ErrBusy = op.ErrBusy
	// ErrClosed: the model or session was closed.
	ErrClosed = op.ErrClosed
)

// wrapf wraps sentinel with a formatted message and an optional cause (kept for errors.Is). A
// cause that already wraps a sentinel of the family keeps its own, more specific one (a kernel's
// ErrUnsupported stays ErrUnsupported inside a prefill's ErrBackend context), so every error
// wraps exactly one sentinel.
func wrapf(sentinel error, cause error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	switch {
	case cause == nil:
		return fmt.Errorf("%w: %s", sentinel, msg)
	case wrapsSentinel(cause):
		return fmt.Errorf("%s: %w", msg, cause)
	}
	return fmt.Errorf("%w: %s: %w", sentinel, msg, cause)
}

var sentinels = []error{ErrInvalidArgument, ErrShape, ErrDType, ErrCapacity, ErrCheckpoint, ErrUnsupported,
	ErrBackend, ErrOutOfMemory, ErrCancelled, ErrBusy, ErrClosed}

func wrapsSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
