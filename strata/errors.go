package strata

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error strata returns wraps exactly one of them (test with errors.Is);
// the C ABI maps them 1:1 onto strata_status codes.
var (
	// ErrInvalidArgument: a value is out of range (token id >= vocab or < 0, empty prompt,
	// unknown backend name, nil receiver, bad option).
	ErrInvalidArgument = errors.New("strata: invalid argument")
	// ErrShape: tensor shapes or lengths do not match.
	ErrShape = errors.New("strata: shape mismatch")
	// ErrDType: an unsupported element type.
	ErrDType = errors.New("strata: unsupported dtype")
	// ErrCapacity: the session's context (max context tokens) would be exceeded.
	ErrCapacity = errors.New("strata: context capacity exceeded")
	// ErrCheckpoint: a missing, corrupt, inconsistent or unsupported checkpoint or config.
	ErrCheckpoint = errors.New("strata: checkpoint error")
	// ErrBackend: the requested backend or device is unavailable, or a kernel failed.
	ErrBackend = errors.New("strata: backend error")
	// ErrCancelled: the context was cancelled; the session is unchanged.
	ErrCancelled = errors.New("strata: cancelled")
	// ErrBusy: the session is in use by another goroutine or thread.
	ErrBusy = errors.New("strata: session busy")
	// ErrClosed: the model or session was closed.
	ErrClosed = errors.New("strata: closed")
)

// wrapf wraps sentinel with a formatted message and an optional cause kept for errors.Is.
func wrapf(sentinel error, cause error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cause != nil {
		return fmt.Errorf("%w: %s: %w", sentinel, msg, cause)
	}
	return fmt.Errorf("%w: %s", sentinel, msg)
}
