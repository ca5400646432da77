package strata

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/stratakernels/strata/internal/blas"
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/metal"
	"github.com/stratakernels/strata/metal/mtl"
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
	// Backend is "auto" (or ""), "cpu" or "metal". metal runs every op of the prefill with the
	// Metal kernels of package metal on MetalDevice, or on the system's default Metal device
	// (metal.SystemDevice, macOS only) when MetalDevice is nil. auto picks metal when MetalDevice
	// is set or, on darwin, when the system device opens; else cpu. The choice is logged at info
	// level.
	Backend string
	// MetalDevice, when set, is the device the metal backend runs on instead of the system's:
	// tests use the MSL emulator (metal/emu) this way, and hosts that manage their own device
	// pass it here. The device stays owned by the caller and must outlive the Device.
	MetalDevice mtl.Device
	// Log receives the library's messages (backend choice, kernels, load progress). nil: silent.
	Log func(level LogLevel, msg string)
}

// Device is an opened compute backend. It is safe for concurrent use; models loaded on it
// share it.
type Device struct {
	backend string
	kernels string
	be      backend
	metal   *metal.Backend // the metal backend's kernels (nil on cpu)
	log     func(LogLevel, string)
	mu      sync.Mutex
}

// Open opens a device. Errors wrap ErrInvalidArgument (unknown backend name) or ErrBackend
// (metal requested where no Metal device opens, e.g. on Linux without an injected
// MetalDevice).
func Open(opts Options) (*Device, error) {
	d := &Device{log: opts.Log}
	switch opts.Backend {
	case "", "auto":
		if opts.MetalDevice != nil {
			if err := d.openMetal(opts.MetalDevice); err != nil {
				return nil, err
			}
			d.logf(LogInfo, "backend auto -> metal (injected device %s)", opts.MetalDevice.Name())
			break
		}
		if runtime.GOOS == "darwin" {
			if dev, err := metal.SystemDevice(); err == nil {
				if err := d.openMetal(dev); err != nil {
					return nil, err
				}
				d.logf(LogInfo, "backend auto -> metal (%s)", dev.Name())
				break
			} else {
				d.logf(LogInfo, "backend auto: no Metal device (%v)", err)
			}
		}
		d.useCPU()
		d.logf(LogInfo, "backend auto -> cpu (%s/%s)", runtime.GOOS, runtime.GOARCH)
	case "cpu":
		d.useCPU()
	case "metal":
		dev := opts.MetalDevice
		if dev == nil {
			var err error
			if dev, err = metal.SystemDevice(); err != nil {
				return nil, wrapf(ErrBackend, err, "backend metal on %s/%s: no Metal device (inject one with Options.MetalDevice)", runtime.GOOS, runtime.GOARCH)
			}
		}
		if err := d.openMetal(dev); err != nil {
			return nil, err
		}
	default:
		return nil, wrapf(ErrInvalidArgument, nil, "unknown backend %q (want auto, cpu or metal)", opts.Backend)
	}
	d.logf(LogInfo, "device: %s", d.Kernels())
	return d, nil
}

func (d *Device) useCPU() {
	d.backend = "cpu"
	d.be = cpuBackend{}
	d.kernels = fmt.Sprintf("cpu (GOMAXPROCS=%d): attention %s, GDN %s, activations %s; GEMM %s",
		runtime.GOMAXPROCS(0), kernels.AttentionKernel(), kernels.GDNKernel(), kernels.ActKernel(), blas.Impl())
}

func (d *Device) openMetal(dev mtl.Device) error {
	b, err := metal.New(dev)
	if err != nil {
		return wrapf(ErrBackend, err, "metal backend")
	}
	d.backend = "metal"
	d.be = metalBackend{b}
	d.metal = b
	d.kernels = fmt.Sprintf("metal kernels on %s", dev.Name())
	return nil
}

// Backend names the backend in use: "cpu" or "metal" ("" for a nil Device).
func (d *Device) Backend() string {
	if d == nil {
		return ""
	}
	return d.backend
}

// Kernels describes the kernels the backend runs: for cpu which BLAS serves GEMM; for metal the
// device and every kernel variant dispatched so far with its count (metal.Backend.Variants),
// e.g. "metal kernels on emu; variants: gemm_w16_BF16_bm32_bn32_bk16 x40, ...".
func (d *Device) Kernels() string {
	if d == nil {
		return ""
	}
	if d.metal == nil {
		return d.kernels
	}
	v := d.metal.Variants()
	if len(v) == 0 {
		return d.kernels + "; no kernel dispatched yet"
	}
	return d.kernels + "; variants: " + strings.Join(v, ", ")
}

func (d *Device) logf(level LogLevel, format string, args ...any) {
	if d == nil || d.log == nil {
		return
	}
	d.log(level, fmt.Sprintf(format, args...))
}
