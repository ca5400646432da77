package strata

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/stratakernels/strata/internal/blas"
)

// LogLevel orders log messages.
type LogLevel int

// Log levels.
const (
	LogDebug LogLevel = iota
	LogInfo
	LogWarn
	LogError
)

func (l LogLevel) String() string {
	switch l {
	case LogDebug:
		return "debug"
	case LogInfo:
		return "info"
	case LogWarn:
		return "warn"
	}
	return "error"
}

// Options configure Open.
type Options struct {
	// Backend is "auto" (or ""), "cpu" or "metal". auto picks metal where a Metal device and
	// the metal backend exist, else cpu; the choice is logged at info level.
	Backend string
	// Log receives the library's messages (backend choice, kernels, load progress). nil: silent.
	Log func(level LogLevel, msg string)
}

// Device is an opened compute backend. It is safe for concurrent use; models loaded on it
// share it.
type Device struct {
	backend string
	kernels string
	log     func(LogLevel, string)
	mu      sync.Mutex
}

// Open opens a device. Errors wrap ErrInvalidArgument (unknown backend name) or ErrBackend
// (a backend that is not available on this machine or build).
func Open(opts Options) (*Device, error) {
	d := &Device{log: opts.Log}
	switch opts.Backend {
	case "", "auto":
		// The metal backend is not part of this build's runner yet; auto therefore means cpu
		// everywhere, and says so.
		d.backend = "cpu"
		d.logf(LogInfo, "backend auto -> cpu (%s/%s; the metal runner backend is not available in this build)", runtime.GOOS, runtime.GOARCH)
	case "cpu":
		d.backend = "cpu"
	case "metal":
		return nil, wrapf(ErrBackend, nil, "backend %q is not available in this build: the model runner runs on the cpu backend; Metal kernels are exercised through metal/", opts.Backend)
	default:
		return nil, wrapf(ErrInvalidArgument, nil, "unknown backend %q (want auto, cpu or metal)", opts.Backend)
	}
	d.kernels = fmt.Sprintf("cpu kernels (Go, GOMAXPROCS=%d), GEMM via %s", runtime.GOMAXPROCS(0), blas.Impl())
	d.logf(LogInfo, "device: %s", d.kernels)
	return d, nil
}

// Backend names the backend in use: "cpu" or "metal".
func (d *Device) Backend() string { return d.backend }

// Kernels describes the kernels the backend runs (e.g. which BLAS serves GEMM).
func (d *Device) Kernels() string { return d.kernels }

func (d *Device) logf(level LogLevel, format string, args ...any) {
	if d == nil || d.log == nil {
		return
	}
	d.log(level, fmt.Sprintf(format, args...))
}
