// Package mtl is the small device interface the Metal backend's host code is written against.
// Two implementations exist: Apple's Metal framework on macOS (through purego, no cgo) and the
// MSL emulator in metal/emu, which compiles the same .metal sources with clang and runs them on
// the CPU with Metal's execution model. Host code written against this interface runs unchanged
// on both, which is how the kernels are tested without Apple hardware.
//
// The interface mirrors the subset of the Metal API strata uses (MTLDevice, MTLBuffer with shared
// storage, MTLLibrary compiled from source, MTLComputePipelineState with function constants,
// MTLCommandBuffer and MTLComputeCommandEncoder); names follow Metal's.
package mtl

import "errors"

// ErrCompile wraps library compilation failures; the message carries the compiler's diagnostics
// (NSError text on Metal, clang output on the emulator).
var ErrCompile = errors.New("mtl: library compilation failed")

// ErrNoFunction is wrapped when a pipeline names a kernel the library does not define.
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
	// NewLibrary compiles MSL source; name identifies the source in diagnostics (e.g. "gdn_prompt.metal").
	NewLibrary(name, source string) (Library, error)
	// NewCommandBuffer starts a command buffer on the device's queue.
	NewCommandBuffer() (CommandBuffer, error)
	// MaxThreadgroupMemoryLength is the threadgroup memory limit in bytes (32 KiB on Apple GPUs).
	MaxThreadgroupMemoryLength() int
	// Close releases the device and its queue.
	Close() error
}

// Buffer is a shared-storage buffer: Contents aliases memory visible to host and device.
type Buffer interface {
	Contents() []byte
	Length() int
	Release()
}

// Library is a compiled MSL source.
type Library interface {
	// Pipeline specialises kernel fn with the given function constants and builds its pipeline.
	Pipeline(fn string, constants []Constant) (Pipeline, error)
}

// Pipeline is a compute pipeline state.
type Pipeline interface {
	Name() string
	MaxTotalThreadsPerThreadgroup() int
	ThreadExecutionWidth() int
	// StaticThreadgroupMemoryLength is the threadgroup memory the kernel declares itself, in bytes.
	StaticThreadgroupMemoryLength() int
}

// CommandBuffer collects encoded work; Commit submits it, Wait blocks until it completed and
// returns its error (wrapping ErrExecution).
type CommandBuffer interface {
	ComputeEncoder() (ComputeEncoder, error)
	Commit()
	Wait() error
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
