// Package emu is the MSL emulator: it compiles Metal Shading Language kernels with clang against
// stand-in headers for metal_stdlib, and runs them on the CPU with Metal's execution model,
// behind the same mtl.Device interface as real Metal. It exists so that the Metal backend's
// kernels and host code are tested on machines without an Apple GPU. CompileFile (and the
// command emu/cmd/mslc) compiles a file as NewLibrary does, for kernel authors.
//
// Compilation: clang preprocesses the source; a pre-pass checks the MSL rules C++ does not
// (specification section 1.5.4 and chapter 4: no double, goto, new/delete, virtual,
// thread_local, static locals, exceptions, run-time type information or std::; program-scope
// variables in constant and initialized; threadgroup variables only in kernels, without
// initializers; kernel signatures: void, attributed or address-space-qualified parameters,
// position attributes of unsigned types), rewrites what clang takes differently, and emits the
// kernel launchers; the result compiles as C++ for OpenCL 2021 (clang -x clcpp), whose address
// spaces are MSL's as checked types: device, threadgroup and constant pointers do not convert
// into one another or into thread pointers, constant is read-only, and functions and member
// functions overload on address spaces. Diagnostics cite the source's file:line:col and name the
// rule. Math functions are overloads per concrete type as in Metal's headers (min(int, uint) is
// ambiguous). Vector constructors and casts convert, never bit-cast; comparisons converted to
// vectors give 1 for true; half vectors combine with scalars of any type (converted to half);
// packed vectors have their elements' alignment (float + packed_float2 is 12 bytes).
//
// Where C++ for OpenCL differs from Metal's compiler, the emulator is more lenient or stricter:
// thread references and thread member functions (MSL's, for objects in thread memory) are
// generic, so a device object binds to a thread reference and calls a thread member function
// (Apple's compiler refuses both); a class object in the constant address space copies only if
// its class declares a constructor from a constant-space object (the emulator's own types do;
// program-scope and static constant variables of class type are declared in device memory,
// read-only, for that reason); a conditional expression whose operands are objects of one class
// in different address spaces, or a bfloat and an integer, is refused (Apple's compiler takes
// it); template arguments are not deduced through vec<T, N> except in class template partial
// specializations, and float literals combined with half8/half16 vectors are refused.
//
// Execution model: the threads of a threadgroup are fibers on one OS thread (a hand-written
// context switch in rt/switch.S); threadgroups are spread over Options.Threads OS threads.
// Threadgroup barriers and simdgroup collectives (simd_sum, prefix sums, shuffles, ballots,
// simdgroup_matrix multiply) are resolved once every live thread has arrived; threads that
// returned are inactive. Threads waiting at different barriers or collectives are reported as
// divergence, and a threadgroup in which no thread can run as deadlock. A kernel's threadgroup
// variables (in any block of its body) are laid out from records the compiler emits: pipeline
// creation reads their size without running the kernel.
//
// Checks a GPU would not report: out-of-bounds accesses (Options.ASan runs every command buffer in
// a helper process built with AddressSanitizer and UBSan's alignment check, buffers allocated at
// their exact length), threadgroup memory read before written (it is poisoned with 0xff bytes:
// NaN, all-ones), missing barriers (run with Forward, Reversed and Shuffled lane schedules and
// compare the results bitwise), and threadgroup memory over 32 KiB (pipelines and dispatches
// fail; Device.Stats reports the bytes each kernel uses).
//
// Lifetimes and limits, as on Metal: libraries, pipelines, buffers and command buffers are the
// caller's until their Release (mtl's contract); the device counts the live ones (Device.Live,
// and LiveObjects for every device of the process), so a host's leak shows without a Mac. A
// pipeline's MaxTotalThreadsPerThreadgroup is the kernel's declared limit, or lower with
// Options.MaxThreadsPerThreadgroup (as Apple's compiler lowers it for register-heavy kernels).
// A missing kernel fails Pipeline with mtl.ErrNoFunction, a bad function constant with
// mtl.ErrCompile, as Metal's NSError codes tell them apart.
//
// Faults: without ASan, libraries run in this process (loaded with purego, no cgo). A kernel that
// faults (a wild or misaligned access, an integer division by zero, a stack overflow: SIGSEGV,
// SIGBUS, SIGFPE, SIGILL) fails its command buffer with mtl.ErrExecution naming the kernel,
// threadgroup and thread; the runtime's signal handler takes only the faults of its worker
// threads' kernels and passes the others to the handler installed before it (the Go runtime's).
// Rerun with ASan to locate an access.
//
// Metal 4 tensor ops: a source that includes <metal_tensor> or
// <MetalPerformancePrimitives/MetalPerformancePrimitives.h> gets include/emu_tensor.h: tensor
// views over device/threadgroup memory (from pointers, with extents and strides; slices),
// mpp::tensor_ops::matmul2d with execution_thread, execution_simdgroup, execution_simdgroups<N>
// and execution_threadgroup scopes, tensor or cooperative_tensor operands and destinations
// (get_capacity, is_valid_element, operator[], get_multidimensional_index, load, store), and
// reduce_rows / reduce_columns with sum, max and min, whose identity defaults to the sum identity
// as in Apple's header. The cooperative layout, implementation-defined on Apple GPUs, is a random
// permutation drawn from Options.Seed: run such kernels under two seeds. Not emulated: MTLTensor
// kernel arguments, iterators and map_iterator (is_iterator_compatible reports false),
// convolution, textures. Quadgroup functions are emulated; half function constants take an
// mtl.Float value rounded to half; os_log messages go to standard error.
//
// Compile options: NewLibrary's mtl.CompileOptions set __METAL_VERSION__ (tensor ops need 4.0,
// as on Apple's compiler) and the floating-point flags of the math mode (optionFlags: safe and
// relaxed keep NaN and infinities, fast is -ffast-math); CompileFile and mslc compile for MSL 4.0
// in safe mode.
//
// Floating point is not the GPU's: math runs in float through libm, half arithmetic rounds after
// every operation, fma contraction follows clang. Compare with the CPU backend under tolerances;
// compare kernel variants with each other bitwise.
//
// clang: the first of $STRATA_CLANG, clang++-16, clang++ on PATH (Debian package clang-16,
// installed by `make deps`). Compiled libraries are cached by content hash under
// $STRATA_MSL_CACHE, or os.UserCacheDir()/strata/msl.
package emu

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"github.com/stratakernels/strata/metal/mtl"
)

// Schedule is the order in which the runnable threads of a threadgroup run between barriers.
type Schedule int

const (
	// Forward runs threads in ascending thread_index_in_threadgroup.
	Forward Schedule = iota
	// Reversed runs threads in descending order.
	Reversed
	// Shuffled runs threads in a random order, drawn again at every scheduling round from
	// Options.Seed and the threadgroup's index (reproducible for a given seed).
	Shuffled
)

func (s Schedule) String() string {
	switch s {
	case Reversed:
		return "reversed"
	case Shuffled:
		return "shuffled"
	}
	return "forward"
}

// Options configure an emulated device.
type Options struct {
	Schedule Schedule
	Seed     uint64 // seed of the Shuffled schedule
	// ASan builds libraries with AddressSanitizer and runs command buffers in a helper process,
	// with every buffer allocated at its exact length; out-of-bounds accesses fail the command
	// buffer with the sanitizer's report and the faulting kernel, threadgroup and thread.
	ASan bool
	// Threads is the number of OS threads running threadgroups; 0 means runtime.NumCPU().
	Threads int
	// CacheDir overrides the cache of compiled libraries ($STRATA_MSL_CACHE, else
	// os.UserCacheDir()/strata/msl).
	CacheDir string
	// Clang overrides the C++ compiler ($STRATA_CLANG, else clang++-16 or clang++ on PATH).
	Clang string
	// MaxThreadsPerThreadgroup, when positive, caps every pipeline's
	// MaxTotalThreadsPerThreadgroup (and the dispatches it allows) at this figure, as Apple's
	// compiler lowers a pipeline's limit below the kernel's declared one when it needs many
	// registers: hosts test their fallbacks for such a pipeline with it.
	MaxThreadsPerThreadgroup int
}

// ThreadgroupMemoryLimit is the threadgroup memory of Apple GPUs, in bytes.
const ThreadgroupMemoryLimit = 32 << 10

const (
	maxBindings  = 31
	maxConstants = 128 // function constant slots of one library
)

// Device is an emulated Metal device; it implements mtl.Device.
type Device struct {
	opts  Options
	tc    *toolchain
	cache string

	mu    sync.Mutex
	libs  []*library
	stats map[string]*KernelStats
	live  liveCounters
}

// KernelStats reports what the dispatches of one kernel used.
type KernelStats struct {
	Kernel string
	// StaticThreadgroupMemory is the bytes of the kernel's own threadgroup variables.
	StaticThreadgroupMemory int
	// MaxThreadgroupMemory is the largest static + dynamic threadgroup memory of a dispatch, in bytes.
	MaxThreadgroupMemory int
	Dispatches           int
	Threadgroups         int64
	Threads              int64
	// Seconds is the wall time of the kernel's dispatches.
	Seconds float64
}

var _ mtl.Device = (*Device)(nil)

// Open creates an emulated device (a *Device: Stats is reached by type assertion). It fails,
// wrapping mtl.ErrCompile, when no clang is found.
func Open(opts Options) (mtl.Device, error) {
	if opts.Threads <= 0 {
		opts.Threads = runtime.NumCPU()
	}
	if opts.Schedule < Forward || opts.Schedule > Shuffled {
		return nil, fmt.Errorf("emu: unknown schedule %d", opts.Schedule)
	}
	if opts.MaxThreadsPerThreadgroup < 0 || opts.MaxThreadsPerThreadgroup > 1024 {
		return nil, fmt.Errorf("emu: Options.MaxThreadsPerThreadgroup %d outside [0, 1024]", opts.MaxThreadsPerThreadgroup)
	}
	clang, err := findClang(opts.Clang)
	if err != nil {
		return nil, err
	}
	cache := opts.CacheDir
	if cache == "" {
		if cache, err = defaultCache(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("emu: cache of compiled kernels (Options.CacheDir, $STRATA_MSL_CACHE): %w: %w", err, ErrCache)
	}
	return &Device{opts: opts, tc: &toolchain{clang: clang, cache: cache}, cache: cache, stats: map[string]*KernelStats{}}, nil
}

// ErrCache is wrapped by Open's error when the cache directory of compiled kernels cannot be
// created.
var ErrCache = errors.New("emu: cache directory unusable")

// defaultCache is $STRATA_MSL_CACHE, else os.UserCacheDir()/strata/msl.
func defaultCache() (string, error) {
	if c := os.Getenv("STRATA_MSL_CACHE"); c != "" {
		return c, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("emu: no cache directory: %w", err)
	}
	return filepath.Join(base, "strata", "msl"), nil
}

func findClang(override string) (string, error) {
	// A clang the caller names (Options.Clang, else $STRATA_CLANG) must be there: falling back
	// to another one would compile with a compiler the user did not choose.
	for _, named := range []struct{ what, c string }{{"Options.Clang", override}, {"STRATA_CLANG", os.Getenv("STRATA_CLANG")}} {
		if named.c == "" {
			continue
		}
		p, err := exec.LookPath(named.c)
		if err != nil {
			return "", fmt.Errorf("emu: %s=%q: %v: %w", named.what, named.c, err, mtl.ErrCompile)
		}
		// It must be clang: another program would fail every compile with no word of why.
		if out, err := exec.Command(p, "--version").Output(); err != nil || !strings.Contains(string(out), "clang") {
			return "", fmt.Errorf("emu: %s=%q is not clang (`%s --version` does not say clang): %w", named.what, named.c, named.c, mtl.ErrCompile)
		}
		return p, nil
	}
	for _, c := range []string{"clang++-16", "clang++"} {
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("emu: no clang++ found (install Debian clang-16: make deps): %w", mtl.ErrCompile)
}

// Name implements mtl.Device.
func (d *Device) Name() string {
	asan := ""
	if d.opts.ASan {
		asan = ", asan"
	}
	return fmt.Sprintf("msl-emulator (%d threads, %s schedule%s)", d.opts.Threads, d.opts.Schedule, asan)
}

// Emulated reports that the device emulates Metal on the CPU (the Metal backend names itself
// "emu" on such a device).
func (d *Device) Emulated() bool { return true }

// MaxThreadgroupMemoryLength implements mtl.Device: 32 KiB.
func (d *Device) MaxThreadgroupMemoryLength() int { return ThreadgroupMemoryLimit }

// Stats returns the per-kernel usage of the dispatches run so far, in order of first use.
func (d *Device) Stats() []KernelStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []KernelStats
	for _, lib := range d.libs {
		for _, k := range lib.prog.Kernels {
			if s, ok := d.stats[lib.key+"/"+k.Host]; ok {
				out = append(out, *s)
			}
		}
	}
	return out
}

// Close implements mtl.Device: it unloads the compiled libraries still loaded. Objects the
// caller did not release stay counted in Live (they would keep a Metal device alive).
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var first error
	for _, l := range d.libs {
		if err := l.close(); err != nil && first == nil {
			first = err
		}
	}
	d.libs = nil
	return first
}

// buffer is shared memory outside the Go heap, page aligned like Metal's buffers.
type buffer struct {
	dev *Device
	mem []byte
}

// NewBuffer implements mtl.Device.
func (d *Device) NewBuffer(length int) (mtl.Buffer, error) {
	if length <= 0 {
		return nil, fmt.Errorf("emu: buffer length %d must be positive", length)
	}
	mem, err := syscall.Mmap(-1, 0, length, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("emu: buffer of %d bytes: %w", length, err)
	}
	d.count(buffers, 1)
	return &buffer{dev: d, mem: mem}, nil
}

func (b *buffer) Contents() []byte { return b.mem }
func (b *buffer) Length() int      { return len(b.mem) }
func (b *buffer) Release() {
	if b.mem != nil {
		_ = syscall.Munmap(b.mem)
		b.mem = nil
		b.dev.count(buffers, -1)
	}
}
