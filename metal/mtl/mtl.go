// Package mtl is the small device interface the Metal backend's host code is written against.
// Two implementations exist: Apple's Metal framework on macOS (through purego, no cgo) and the
// MSL emulator in emu/, which compiles the same .metal sources with clang and runs them on
// the CPU with Metal's execution model. Host code written against this interface runs unchanged
// on both, which is how the kernels are tested without Apple hardware.
//
// The interface mirrors the subset of the Metal API strata uses (MTLDevice, MTLBuffer with shared
// storage, MTLLibrary compiled from source, MTLComputePipelineState with function constants,
// MTLCommandBuffer and MTLComputeCommandEncoder); names follow Metal's.
package mtl

import (
	"errors"
	"fmt"
	"time"
)

// ErrCompile wraps library compilation failures; the message carries the compiler's diagnostics
// (NSError text on Metal, clang output on the emulator).
var ErrCompile = errors.New("mtl: library compilation failed")

// ErrNoFunction is wrapped when a pipeline names a kernel the library does not define (and only
// then: on Metal, NSError code MTLLibraryErrorFunctionNotFound, 5). A kernel that exists but
// cannot be specialised (a function constant of the wrong type, one missing without a default)
// fails with ErrCompile (MTLLibraryErrorCompileFailure, 3, and every other code).
var ErrNoFunction = errors.New("mtl: no such kernel function")

// ErrExecution wraps a command buffer that failed (GPU error, emulator fault: out-of-bounds
// access, threadgroup memory over the limit, divergent collective, deadlock).
var ErrExecution = errors.New("mtl: command buffer failed")

// ConstantType is the type of a function constant.
type ConstantType int

const (
	Bool ConstantType = iota
	Int
	UInt
	Float
)

// Constant is one function constant value ([[function_constant(Index)]] in MSL).
type Constant struct {
	Index int
	Type  ConstantType
	Value uint32 // bool as 0/1, int/uint as two's complement bits, float as IEEE-754 bits
}

// Device is a GPU (or the emulator).
type Device interface {
	// Name is the device's name (MTLDevice.name, or "msl-emulator (N threads)").
	Name() string
	// NewBuffer allocates a zeroed shared-storage buffer of length bytes.
	NewBuffer(length int) (Buffer, error)
	// NewLibrary compiles MSL source with opts (MTLCompileOptions); name identifies the source in
	// diagnostics (e.g. "gdn.metal"). Options the device cannot honour (a language version
	// it does not know, opts.Check failing) fail with ErrCompile rather than compiling otherwise.
	NewLibrary(name, source string, opts CompileOptions) (Library, error)
	// NewCommandBuffer starts a command buffer on the device's queue.
	NewCommandBuffer() (CommandBuffer, error)
	// MaxThreadgroupMemoryLength is the threadgroup memory limit in bytes (32 KiB on Apple GPUs).
	MaxThreadgroupMemoryLength() int
	// Close releases the device and its queue. Libraries, pipelines, buffers and command buffers
	// must be released first (each keeps the device alive on Metal).
	Close() error
}

// Object lifetimes: every Library, Pipeline, Buffer and CommandBuffer a Device hands out is owned
// by the caller until its Release (on Metal each holds a reference to the device, so an object
// never released keeps the device alive after Close). Release is idempotent; an object must not
// be used after it, and a Pipeline must be released before its Library stops being used (a
// Library's Release does not release its pipelines).

// Buffer is a shared-storage buffer: Contents aliases memory visible to host and device.
type Buffer interface {
	Contents() []byte
	Length() int
	Release()
}

// Library is a compiled MSL source.
type Library interface {
	// Pipeline specialises kernel fn with the given function constants and builds its pipeline.
	// Errors: ErrNoFunction when the library has no kernel fn, ErrCompile for every other
	// failure (constants of the wrong type, the pipeline's own compilation).
	Pipeline(fn string, constants []Constant) (Pipeline, error)
	// Release releases the library.
	Release()
}

// Pipeline is a compute pipeline state.
type Pipeline interface {
	Name() string
	MaxTotalThreadsPerThreadgroup() int
	ThreadExecutionWidth() int
	// StaticThreadgroupMemoryLength is the threadgroup memory the kernel declares itself, in bytes.
	StaticThreadgroupMemoryLength() int
	// Release releases the pipeline state.
	Release()
}

// CommandBuffer collects encoded work; Commit submits it, Wait blocks until it completed and
// returns its error (wrapping ErrExecution). Release releases it and its encoders: after Wait,
// or instead of Commit to abandon it (a command buffer whose encoder could not be created, or
// whose encoding failed); releasing a committed command buffer before Wait is not allowed.
type CommandBuffer interface {
	ComputeEncoder() (ComputeEncoder, error)
	Commit()
	Wait() error
	Release()
}

// ComputeEncoder encodes compute dispatches. Dispatches in one encoder run in order (Metal's
// serial dispatch type): each sees the writes of the previous ones.
type ComputeEncoder interface {
	SetPipeline(p Pipeline)
	SetBuffer(b Buffer, offset, index int)
	SetBytes(data []byte, index int)
	SetThreadgroupMemoryLength(length, index int)
	// DispatchThreadgroups runs groups[0]*groups[1]*groups[2] threadgroups of
	// threads[0]*threads[1]*threads[2] threads each.
	DispatchThreadgroups(groups, threads [3]int)
	EndEncoding()
}

// LanguageVersion is an MSL language version encoded as MTLLanguageVersion: major<<16 | minor.
type LanguageVersion uint32

// The language versions strata compiles for.
const (
	// Language3_1 is MSL 3.1 (macOS 14): simdgroup matrices, bfloat.
	Language3_1 LanguageVersion = 3<<16 | 1
	// Language3_2 is MSL 3.2 (macOS 15).
	Language3_2 LanguageVersion = 3<<16 | 2
	// Language4_0 is MSL 4.0 (macOS 26): Metal 4 tensor ops (<metal_tensor>,
	// MetalPerformancePrimitives' mpp::tensor_ops).
	Language4_0 LanguageVersion = 4 << 16
)

func (v LanguageVersion) String() string { return fmt.Sprintf("%d.%d", v>>16, v&0xffff) }

// MathMode is MTLMathMode: the floating-point transformations the compiler may make.
type MathMode int

// Math modes, with MTLMathMode's values.
const (
	// MathSafe allows no transformation that could change a result (IEEE 754 arithmetic; isnan,
	// isinf, infinities and NaN behave as the standard says).
	MathSafe MathMode = 0
	// MathRelaxed allows lossy rewrites (reassociation, reciprocals) but honours infinities and
	// NaN. Apple's documentation calls it the default on Apple silicon.
	MathRelaxed MathMode = 1
	// MathFast also assumes that no value is NaN or infinite: isnan may fold to false and -inf
	// sentinels may be optimised away (the fastMathEnabled behaviour).
	MathFast MathMode = 2
)

func (m MathMode) String() string {
	switch m {
	case MathSafe:
		return "safe"
	case MathRelaxed:
		return "relaxed"
	case MathFast:
		return "fast"
	}
	return fmt.Sprintf("MathMode(%d)", int(m))
}

// CompileOptions are the MTLCompileOptions a library is compiled with. Every field is set
// explicitly by the caller: the zero value is not a valid configuration (Check).
type CompileOptions struct {
	LanguageVersion LanguageVersion
	MathMode        MathMode
	// PreciseFunctions selects the precise float32 math functions
	// (MTLMathFloatingPointFunctionsPrecise) over the fast ones, Metal's default.
	PreciseFunctions bool
}

// Check reports options no device compiles with (an unknown language version or math mode),
// wrapping ErrCompile.
func (o CompileOptions) Check() error {
	switch o.LanguageVersion {
	case Language3_1, Language3_2, Language4_0:
	default:
		return fmt.Errorf("mtl: compile options: language version %s (%#x) is not one strata compiles for: %w", o.LanguageVersion, uint32(o.LanguageVersion), ErrCompile)
	}
	if o.MathMode < MathSafe || o.MathMode > MathFast {
		return fmt.Errorf("mtl: compile options: %v: %w", o.MathMode, ErrCompile)
	}
	return nil
}

func (o CompileOptions) String() string {
	fn := "fast"
	if o.PreciseFunctions {
		fn = "precise"
	}
	return fmt.Sprintf("MSL %s, math mode %s, %s float32 functions", o.LanguageVersion, o.MathMode, fn)
}

// GPUFamily is an MTLGPUFamily value.
type GPUFamily int

// The GPU families strata asks about, with MTLGPUFamily's values.
const (
	FamilyApple7 GPUFamily = 1007 // M1
	FamilyApple8 GPUFamily = 1008 // M2
	FamilyApple9 GPUFamily = 1009 // M3, M4
	// FamilyApple10 (M5) has the matrix units ("neural accelerators") behind Metal 4 tensor ops.
	FamilyApple10 GPUFamily = 1010
	FamilyMetal3  GPUFamily = 5001
	// FamilyMetal4 is Metal 4 support (MSL 4.0 and tensor ops; macOS 26).
	FamilyMetal4 GPUFamily = 5002
)

func (f GPUFamily) String() string {
	switch {
	case f >= 1001 && f <= 1099:
		return fmt.Sprintf("Apple%d", int(f)-1000)
	case f == FamilyMetal3:
		return "Metal3"
	case f == FamilyMetal4:
		return "Metal4"
	}
	return fmt.Sprintf("GPUFamily(%d)", int(f))
}

// FamilyReporter is implemented by devices that answer MTLDevice.supportsFamily:. The emulator
// does not implement it: it belongs to no Apple family, so kernel variants chosen by capability
// (Metal 4 tensor ops on M5) are reached there only by asking for them.
type FamilyReporter interface {
	SupportsFamily(f GPUFamily) bool
}

// AutoreleasePooler is implemented by devices whose API hands out autoreleased Objective-C
// objects (Apple's Metal: command buffers, encoders, strings, errors). A Go thread has no
// autorelease pool, so without one every such object leaks. AutoreleasePool runs fn on one OS
// thread inside one pool (objc_autoreleasePoolPush before, objc_autoreleasePoolPop after, also
// when fn panics); pools nest. The Metal backend runs the whole life of each command buffer
// (creation, encoding, commit, wait, release) inside one AutoreleasePool call.
type AutoreleasePooler interface {
	AutoreleasePool(fn func())
}

// GPUTimer is implemented by command buffers that report the GPU time they took
// (MTLCommandBuffer GPUEndTime - GPUStartTime), valid after Wait returned nil; 0 when unknown.
type GPUTimer interface {
	GPUTime() time.Duration
}

// Describer is implemented by devices that can describe themselves beyond Name (OS version,
// GPU families, counter sampling): key-value pairs in a fixed order, for reports.
type Describer interface {
	Describe() [][2]string
}

// Live counts the objects a device handed out and its caller has not released yet (the
// lifetime contract above); a host that released everything before closing its device leaves
// every count zero.
type Live struct {
	Libraries, Pipelines, Buffers, CommandBuffers int64
}

// Total is the number of live objects of every kind.
func (l Live) Total() int64 { return l.Libraries + l.Pipelines + l.Buffers + l.CommandBuffers }

func (l Live) String() string {
	return fmt.Sprintf("%d libraries, %d pipelines, %d buffers, %d command buffers", l.Libraries, l.Pipelines, l.Buffers, l.CommandBuffers)
}

// LiveCounter is implemented by devices that count their live objects (Apple's Metal device of
// package metal and the emulator): leak checks read it after a host closed everything.
type LiveCounter interface {
	Live() Live
}
