package strata

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/stratakernels/strata/emu"
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/metal"
	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
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
	// Backend is "auto" (or ""), "cpu", "metal" or "emu". metal runs every op of the prefill with
	// the Metal kernels of package metal on MetalDevice, or on the system's default Metal device
	// (metal.SystemDevice, macOS only) when MetalDevice is nil. emu runs the same Metal backend on
	// the MSL emulator (emu: the exact .metal files compiled with clang and run on the CPU;
	// for tests and for debugging kernels without a Mac; thousands of times slower than a GPU).
	// auto picks metal when MetalDevice is set or, on darwin, when the system device opens, and
	// the device passes metal.Probe (an Apple7-or-later GPU whose compiler takes the kernels'
	// MSL 3.1: not an Intel Mac's GPU, not macOS 13); else cpu, and the kernels line (Kernels)
	// says why metal was not taken. metal fails (ErrUnsupported) where the device does not pass
	// the probe. The
	// choice is logged at info level.
	Backend string
	// MetalDevice, when set, is the device the metal backend runs on instead of the system's
	// (a host that manages its own device, or an emulator opened with chosen options). The device
	// stays owned by the caller and must outlive the Device.
	MetalDevice mtl.Device
	// Log receives the library's messages (backend choice, kernels, load progress). nil: silent.
	Log func(level LogLevel, msg string)
}

// Device is an opened compute backend (an op.Backend: package kernels on the CPU, package
// metal on a Metal device or the emulator). It is safe for concurrent use; models loaded on it
// share it. Close releases a device Open created itself (the emulator of backend "emu").
type Device struct {
	be  op.Backend
	own mtl.Device // closed by Close (nil for injected and CPU devices)
	// notMetal says why backend auto did not take metal ("" when it did, or was not asked).
	notMetal string
	log      func(LogLevel, string)
	mu       sync.Mutex
	done     bool
}

// Open opens a device. Errors wrap ErrInvalidArgument (unknown backend name), ErrBackend
// (metal requested where no Metal device opens, e.g. on Linux without an injected
// MetalDevice; emu without clang) or ErrUnsupported (metal requested on a device that fails
// metal.Probe, with the reason).
func Open(opts Options) (*Device, error) {
	d := &Device{log: opts.Log}
	switch opts.Backend {
	case "", "auto":
		dev, what := opts.MetalDevice, "injected device"
		if dev == nil && runtime.GOOS == "darwin" {
			var err error
			if dev, err = metal.SystemDevice(); err != nil {
				d.notMetal = fmt.Sprintf("metal not taken: no Metal device (%v)", err)
			}
			what = "system device"
		}
		if dev != nil {
			if err := metal.Probe(dev); err != nil {
				d.notMetal = fmt.Sprintf("metal not taken: %v", err)
				if opts.MetalDevice == nil {
					dev.Close()
				}
			} else {
				if err := d.openMetal(dev); err != nil {
					return nil, err
				}
				if opts.MetalDevice == nil {
					d.own = dev
				}
				d.logf(LogInfo, "backend auto -> %s (%s %s)", d.be.Name(), what, dev.Name())
				break
			}
		}
		d.be = kernels.Backend{}
		if d.notMetal != "" {
			d.logf(LogInfo, "backend auto -> cpu (%s/%s): %s", runtime.GOOS, runtime.GOARCH, d.notMetal)
		} else {
			d.logf(LogInfo, "backend auto -> cpu (%s/%s)", runtime.GOOS, runtime.GOARCH)
		}
	case "cpu":
		d.be = kernels.Backend{}
	case "metal":
		dev := opts.MetalDevice
		if dev == nil {
			var err error
			if dev, err = metal.SystemDevice(); err != nil {
				return nil, wrapf(ErrBackend, err, "backend metal on %s/%s: no Metal device (on Linux, backend emu runs the Metal kernels on the MSL emulator)", runtime.GOOS, runtime.GOARCH)
			}
			d.own = dev
		}
		if err := metal.Probe(dev); err != nil {
			if d.own != nil {
				d.own.Close()
			}
			return nil, wrapf(ErrBackend, err, "backend metal")
		}
		if err := d.openMetal(dev); err != nil {
			return nil, err
		}
	case "emu":
		dev := opts.MetalDevice
		if dev == nil {
			var err error
			if dev, err = emu.Open(emu.Options{}); err != nil {
				if errors.Is(err, emu.ErrCache) {
					return nil, wrapf(ErrBackend, err, "backend emu")
				}
				return nil, wrapf(ErrBackend, err, "backend emu: the MSL emulator needs clang (Debian package clang-16, or $STRATA_CLANG)")
			}
			d.own = dev
		}
		if err := d.openMetal(dev); err != nil {
			return nil, err
		}
	default:
		return nil, wrapf(ErrInvalidArgument, nil, "unknown backend %q (want auto, cpu, metal or emu)", opts.Backend)
	}
	d.logf(LogInfo, "device: %s", d.Kernels())
	return d, nil
}

func (d *Device) openMetal(dev mtl.Device) error {
	b, err := metal.New(dev)
	if err != nil {
		return wrapf(ErrBackend, err, "metal backend")
	}
	b.SetLog(func(msg string) { d.logf(LogInfo, "%s", msg) })
	d.be = b
	return nil
}

// Close releases the Metal backend's pipelines and libraries, and a device that Open created
// itself (the system Metal device, the emulator); an injected MetalDevice stays the caller's.
// Models and sessions of the device must be closed first. Closing twice, or a nil Device, is a
// no-op.
func (d *Device) Close() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done {
		return nil
	}
	d.done = true
	var err error
	if mb, ok := d.be.(*metal.Backend); ok {
		err = mb.Close()
	}
	if d.own != nil {
		err = errors.Join(err, d.own.Close())
	}
	return err
}

// Backend names the backend in use: "cpu", "metal" or "emu" ("" for a nil Device).
func (d *Device) Backend() string {
	if d == nil {
		return ""
	}
	return d.be.Name()
}

// Ops is the device's backend for hosts that run ops themselves, outside any model: the op
// entry points of this package (Attention, GDNScan, ...) run on it, and op/optest times op
// cases on it (optest.Time; cmd/strata --bench). Its tensors, weight stores and Passes
// are the caller's to manage, and a model's weights are not reachable through it. nil for a nil
// Device.
func (d *Device) Ops() op.Backend {
	if d == nil {
		return nil
	}
	return d.be
}

// Kernels describes the kernels the backend runs: for cpu the instruction sets of its kernels
// and which BLAS serves GEMM, then, where backend auto had a Metal device it did not take, why
// ("; metal not taken: ..."); for metal and emu the device and every kernel variant dispatched
// so far with its count, e.g. "metal kernels on msl-emulator (2 threads); variants:
// gemm_w16_BF16_bm32_bn32_bk16 x40, ...".
func (d *Device) Kernels() string {
	if d == nil {
		return ""
	}
	if d.notMetal != "" {
		return d.be.Kernels() + "; " + d.notMetal
	}
	return d.be.Kernels()
}

// ComputeModes are the names LoadOptions.Compute takes: "f32" (the default), "bf16", "int8".
var ComputeModes = slices.Clone(op.ComputeModes)

// ComputeKernels describes what each compute mode (LoadOptions.Compute) runs on this machine's
// CPU: the int8 and bf16 kernels and the weight formats each takes (Model.Compute says what a
// loaded model ran).
func ComputeKernels() string { return kernels.ComputeKernels() }

func (d *Device) logf(level LogLevel, format string, args ...any) {
	if d == nil || d.log == nil {
		return
	}
	d.log(level, fmt.Sprintf(format, args...))
}
