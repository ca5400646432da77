// Package metal is strata's Metal backend: the MSL kernels in metal/kernels (embedded) and the Go
// host code that compiles them, picks a kernel variant for each call and encodes the dispatches.
// Each kernel file is one op family paired with the host file that dispatches its kernels
// (norm.go and kernels/norm.metal, moe.go and kernels/moe.metal, ...; the Metal 4 tensor-op
// twins as *_tensor.metal); the helpers several kernel files share are in kernels/common.h, the
// parameter structs in kernels/params.h.
// The host code is written against the small device interface of metal/mtl, so the same code runs
// on Apple GPUs (the purego-based device of this package, darwin only) and on the MSL emulator of
// emu, which is how the kernels are tested without Apple hardware.
//
// Backend implements op.Backend: every op of op.Pass is encoded over device tensors (Tensor,
// shared storage) into the command buffers of a Pass (Begin; split by CommandBufferBudget), with weights from a per-model
// Weights (uploaded on first use; 16-bit weights stay 16-bit, MLX affine-quantized weights
// (op.QAffine), FP8Block, QFloat and GGML ones stay packed) and temporaries from a per-session
// Arena, committed once and waited for once. The ops are tested with op/optest against float64
// references, like the CPU backend's. Errors wrap op.ErrShape, op.ErrDType or
// op.ErrInvalidArgument for bad input (each op's Check, before any work), op.ErrUnsupported for
// shapes a kernel does not take (named in the message), and op.ErrBackend with
// mtl.ErrCompile / mtl.ErrExecution for device failures.
//
// The ops cover a whole prefill of both model families: GEMM (16-bit and float32 weights, and
// 2- to 8-bit affine-quantized ones read packed by qmm_affine / qmv_affine of quant.metal, with a
// Metal 4 tensor-op form in quant_tensor.metal; 8- and 4-bit float formats likewise in
// fpquant.metal; ggml's block types as the GGUF file stores them in ggml.metal; grouped MoE
// experts with the slot table built on the device), embedding gathers (dequantizing quantized tables), RMSNorm1p and the GatedResidual
// read/write, MoE routing and combine, Gated DeltaNet, QSA preparation, indexer and attention,
// PLE, the element-wise gates and a copy kernel (the device interface has no blit encoder).
//
// Kernel choice: each op picks its kernel from the shapes; Alternatives lists the other kernels
// Prefer can choose per op, which of them give the default's bits and the tolerances of the
// others. On GPUs with the matrix units behind Metal 4 tensor ops (MTLGPUFamilyApple10 with
// Metal 4: M5) attention and the GEMMs default to tensor-op kernels (attention_tensor.metal,
// gemm_tensor.metal) once a first-use self-check on the device passed (tensorops.go). Every
// pipeline the backend can build is in one table (Pipelines); every file compiles with
// CompileOptions (safe math). The self-test command metal/cmd/selftest builds them all and runs
// the op case table with every kernel on a device, and reports.
//
// Command buffers: a Pass records its dispatches and, at Commit, splits them into command
// buffers within the Backend's CommandBufferBudget (macOS stops command buffers that run too
// long), then creates, encodes, commits, waits for and releases them inside one autorelease
// pool (mtl.AutoreleasePooler: Metal's Objective-C API hands out autoreleased objects, and a Go
// thread has no pool of its own); Commit reports the command buffers' GPU time where the device
// has it (mtl.GPUTimer) and the emulator's per-dispatch times per Stage. Close releases the
// libraries and pipelines the Backend built.
//
// Offsets the kernels compute in 32-bit integers are guarded on the host: every buffer a kernel
// indexes must hold fewer than 2^31 elements.
package metal

import (
	"embed"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
)

//go:embed kernels/*.metal kernels/*.h
var kernelFS embed.FS

// ParamsHeader is the file of kernel parameter structs (kernels/params.h) that is prepended to
// every kernel file before it is compiled; its structs have Go twins in params.go.
const ParamsHeader = "params.h"

// Source returns the embedded MSL source of one kernel file (e.g. "gdn.metal") as it is
// written, or of a header (ParamsHeader, "common.h"). Errors wrap op.ErrInvalidArgument for an
// unknown file.
func Source(file string) (string, error) {
	b, err := kernelFS.ReadFile("kernels/" + file)
	if err != nil {
		return "", fmt.Errorf("metal: %w: no kernel file %q", op.ErrInvalidArgument, file)
	}
	return string(b), nil
}

// CompileSource is what the device compiles for kernel file name with source src: ParamsHeader,
// then src, each under a #line directive naming it, so that diagnostics cite each file's own
// lines. Each line `#include "H"` of src that names an embedded header H (common.h) is replaced
// by H's text under a #line directive naming H, followed by one that resumes src's numbering:
// Metal compiles source text, with no include path to find H in. H's own quoted includes are not
// expanded (the embedded headers have none).
func CompileSource(name, src string) string {
	hdr, err := Source(ParamsHeader)
	if err != nil {
		panic("metal: the embedded " + ParamsHeader + " is missing")
	}
	return "#line 1 \"" + ParamsHeader + "\"\n" + hdr + "#line 1 \"" + name + "\"\n" + inlineHeaders(name, src)
}

var (
	quotedInclude = regexp.MustCompile(`^\s*#\s*include\s+"([^"]+\.h)"\s*$`)
	lineDirective = regexp.MustCompile(`^\s*#\s*line\s+(\d+)\s+"([^"]*)"`)
)

// inlineHeaders replaces the quoted includes of embedded headers in src (see CompileSource).
// file is the name src's first line has in diagnostics; a #line directive in src (the library
// writes one between the files it concatenates) sets the name and number of the next line.
func inlineHeaders(file, src string) string {
	var out strings.Builder
	n := 1 // number of the current line in file
	for _, l := range strings.SplitAfter(src, "\n") {
		if m := lineDirective.FindStringSubmatch(l); m != nil {
			out.WriteString(l)
			file = m[2]
			n, _ = strconv.Atoi(m[1]) // digits only: the regexp's
			continue
		}
		if m := quotedInclude.FindStringSubmatch(strings.TrimRight(l, "\r\n")); m != nil && m[1] != ParamsHeader {
			if h, err := Source(m[1]); err == nil {
				fmt.Fprintf(&out, "#line 1 %q\n%s", m[1], h)
				if !strings.HasSuffix(h, "\n") {
					out.WriteString("\n")
				}
				fmt.Fprintf(&out, "#line %d %q\n", n+1, file)
				n++
				continue
			}
		}
		out.WriteString(l)
		n++
	}
	return out.String()
}

// Sources lists the embedded kernel files (*.metal).
func Sources() []string {
	ents, _ := kernelFS.ReadDir("kernels")
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".metal") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// Backend runs strata's ops on one mtl.Device. Libraries are compiled on first use and pipelines
// cached by (file, kernel, function constants). A Backend is safe for concurrent use; each
// host-slice op call and each Pass uses its own command buffer (a Pass belongs to one goroutine).
type Backend struct {
	dev  mtl.Device
	name string

	mu        sync.Mutex
	overrides map[string]string // file -> replacement source (A/B candidates)
	libs      map[string]mtl.Library
	pipes     map[string]mtl.Pipeline
	ran       map[string]*VariantStat // variant name -> its dispatches
	prefer    map[string]string       // op -> kernel chosen by Prefer
	rope      map[ropeKey][]float32
	log       func(msg string)
	tensor    map[string]*tensorChoice // op -> the capability default's decision (tensorops.go)
	closed    bool
	fellBack  map[string]bool // tiled kernels replaced by a narrower one (qmmPipeline), logged once
	budget    CommandBufferBudget
	cbTimes   []time.Duration // GPU time of each command buffer (CommandBufferTimes)
}

var _ op.Backend = (*Backend)(nil)

// emulated is implemented by devices that emulate Metal on the CPU (emu).
type emulated interface{ Emulated() bool }

// New returns a Backend on dev. The device stays owned by the caller. The backend's name is
// "emu" on an emulated device (emu), else "metal".
func New(dev mtl.Device) (*Backend, error) {
	if dev == nil {
		return nil, fmt.Errorf("metal: %w: nil device", op.ErrInvalidArgument)
	}
	name := "metal"
	if e, ok := dev.(emulated); ok && e.Emulated() {
		name = "emu"
	}
	return &Backend{
		dev:       dev,
		name:      name,
		overrides: map[string]string{},
		libs:      map[string]mtl.Library{},
		pipes:     map[string]mtl.Pipeline{},
		ran:       map[string]*VariantStat{},
		prefer:    map[string]string{},
		tensor:    map[string]*tensorChoice{},
		budget:    DefaultCommandBufferBudget,
		fellBack:  map[string]bool{},
	}, nil
}

// SetLog sets the function that receives the backend's log messages (the tensor-op kernels'
// first-use decisions); nil silences them. Call it before the first op.
func (b *Backend) SetLog(log func(msg string)) {
	b.mu.Lock()
	b.log = log
	b.mu.Unlock()
}

func (b *Backend) logf(format string, args ...any) {
	b.mu.Lock()
	log := b.log
	b.mu.Unlock()
	if log != nil {
		log(fmt.Sprintf(format, args...))
	}
}

// Close releases the pipelines and libraries the Backend built (mtl's object lifetimes: each
// holds the device on Metal); the device stays the caller's. The tensors, weights and scratch of
// the Backend are released by their owners (Free, Weights.Release, Arena.Release) before it.
// After Close no library or pipeline is built: an op that needs one fails with op.ErrBackend.
// Closing twice is a no-op.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for k, p := range b.pipes {
		p.Release()
		delete(b.pipes, k)
	}
	for f, l := range b.libs {
		l.Release()
		delete(b.libs, f)
	}
	return nil
}

// Device returns the device the Backend runs on.
func (b *Backend) Device() mtl.Device { return b.dev }

// Name implements op.Backend: "metal", or "emu" on the MSL emulator.
func (b *Backend) Name() string { return b.name }

// Kernels implements op.Backend: the device, the tensor-op decisions made so far (TensorOps) and
// every kernel variant dispatched so far with its count, e.g. "metal kernels on msl-emulator
// (2 threads); variants: gemm_w16_BF16_bm32_bn32_bk16 x40, ...".
func (b *Backend) Kernels() string {
	s := "metal kernels on " + b.dev.Name()
	if d := b.TensorOps(); len(d) > 0 {
		s += "; tensor ops: " + strings.Join(d, "; ")
	}
	if v := b.Variants(); len(v) > 0 {
		return s + "; variants: " + strings.Join(v, ", ")
	}
	return s + "; no kernel dispatched yet"
}

// SetSource replaces the source of one kernel file for this Backend (the A/B harness runs a
// candidate file this way). It must be called before the file's first use, and before the first
// use of a file compiled after it (quant.metal is compiled ahead of quant_tensor.metal).
// Headers (ParamsHeader, common.h) are not replaced: replace the kernel files that use them.
// Errors wrap op.ErrInvalidArgument when the file is unknown, a header or already compiled.
func (b *Backend) SetSource(file, src string) error {
	if _, err := Source(file); err != nil {
		return err
	}
	if !strings.HasSuffix(file, ".metal") {
		return fmt.Errorf("metal: %w: %s is a header, not a kernel file: replace the kernel files that include it", op.ErrInvalidArgument, file)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for f := range b.libs {
		if f == file || slices.Contains(kernelDeps[f], file) {
			return fmt.Errorf("metal: %w: %s is already compiled", op.ErrInvalidArgument, file)
		}
	}
	b.overrides[file] = src
	return nil
}

// Prefer makes op run kernel instead of the one the host picks (from the shapes and, for the
// Metal 4 tensor-op kernels, from the device's capability): the ops and kernels of Alternatives,
// which says which alternatives give the default's bits and which agree within tolerances. The
// A/B harness, the self-test and the tests use it to compare them; on the emulator it is how the
// tensor-op kernels run (the emulator reports no Apple GPU family). An empty kernel restores the
// default. Op "qmm" (the GEMMs of QAffine weights, grouped or not) has qmm_affine, qmv_affine
// (the defaults above and up to 4 rows per weight) and qmm_affine_tensor (Metal 4 tensor ops);
// op "qmm_fp" (FP8Block and QFloat weights) likewise qmm_fp, qmv_fp and qmm_fp_tensor, op
// "qmm_gg" (GGML weights) qmm_gg, qmv_gg and qmm_gg_tensor.
// Errors wrap op.ErrInvalidArgument for an op or kernel without alternatives, and
// op.ErrUnsupported for a tensor-op kernel on a device without Metal 4.
func (b *Backend) Prefer(opName, kernel string) error {
	kernels := alternativesOf(opName)
	if kernels == nil {
		return fmt.Errorf("metal: %w: op %q has no kernel variants", op.ErrInvalidArgument, opName)
	}
	var alt *Alternative
	for i := range kernels {
		if kernels[i].Kernel == kernel {
			alt = &kernels[i]
		}
	}
	if kernel != "" && alt == nil {
		names := make([]string, len(kernels))
		for i, k := range kernels {
			names[i] = k.Kernel
		}
		return fmt.Errorf("metal: %w: %q is not a kernel of op %q (have %v)", op.ErrInvalidArgument, kernel, opName, names)
	}
	if alt != nil && alt.Tensor && !b.TensorOpsCompile() {
		return fmt.Errorf("metal: %w: %s uses Metal 4 tensor ops, which %s does not support (MTLGPUFamilyMetal4)", op.ErrUnsupported, kernel, b.dev.Name())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if kernel == "" {
		delete(b.prefer, opName)
	} else {
		b.prefer[opName] = kernel
	}
	return nil
}

func (b *Backend) preferred(opName, def string) string {
	if k, ok := b.preferredOK(opName); ok {
		return k
	}
	return def
}

// preferredOK is the kernel Prefer chose for op, if any.
func (b *Backend) preferredOK(opName string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k, ok := b.prefer[opName]
	return k, ok
}

// Variants returns the kernel variants dispatched so far with their dispatch counts, as
// "name xN" lines sorted by name. Variant names say the tile sizes (MLX style), e.g.
// "qsa_flash_f32_hpg12_tq1_bd256".
func (b *Backend) Variants() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for k, st := range b.ran {
		out = append(out, fmt.Sprintf("%s x%d", k, st.Dispatches))
	}
	sort.Strings(out)
	return out
}

// VariantStat is what the dispatches of one kernel variant used.
type VariantStat struct {
	// Variant is the variant's name (tile sizes, MLX style), e.g.
	// "qsa_flash_f32_hpg12_tq1_bk32_bd256"; Kernel its kernel function, e.g. "qsa_flash".
	Variant, Kernel string
	Dispatches      int
	// ThreadgroupBytes is the largest threadgroup memory of a dispatch: the kernel's static
	// threadgroup variables plus the dynamic length the host set, rounded up to 16 bytes.
	ThreadgroupBytes int
}

// VariantStats returns the variants dispatched so far, sorted by name.
func (b *Backend) VariantStats() []VariantStat {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]VariantStat, 0, len(b.ran))
	for _, st := range b.ran {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Variant < out[k].Variant })
	return out
}

// ResetVariants clears the variant record and the command buffers' times.
func (b *Backend) ResetVariants() {
	b.mu.Lock()
	clear(b.ran)
	b.cbTimes = nil
	b.mu.Unlock()
}

// kernelDeps lists the kernel files compiled ahead of a file in its library, for their helpers:
// quant_tensor.metal (Metal 4 tensor ops) builds on quant.metal, which stays a file of its own so
// that it compiles on systems without Metal 4; fpquant.metal and ggml.metal on quant.metal's
// tile and row loops, fpquant_tensor.metal and ggml_tensor.metal on quant.metal,
// quant_tensor.metal and their own family's file.
var kernelDeps = map[string][]string{
	"quant_tensor.metal":   {"quant.metal"},
	"fpquant.metal":        {"quant.metal"},
	"fpquant_tensor.metal": {"quant.metal", "quant_tensor.metal", "fpquant.metal"},
	"ggml.metal":           {"quant.metal"},
	"ggml_tensor.metal":    {"quant.metal", "quant_tensor.metal", "ggml.metal"},
}

// source is a kernel file's source for this Backend (its SetSource replacement, if any).
func (b *Backend) source(file string) (string, error) {
	if src, ok := b.overrides[file]; ok {
		return src, nil
	}
	return Source(file)
}

func (b *Backend) library(file string) (mtl.Library, error) {
	if b.closed {
		return nil, fmt.Errorf("metal: compiling %s: %w: backend closed", file, op.ErrBackend)
	}
	if lib, ok := b.libs[file]; ok {
		return lib, nil
	}
	src, err := b.source(file)
	if err != nil {
		return nil, err
	}
	name := file
	if deps := kernelDeps[file]; len(deps) > 0 {
		var all strings.Builder
		for i, d := range deps {
			ds, err := b.source(d)
			if err != nil {
				return nil, err
			}
			if i > 0 {
				fmt.Fprintf(&all, "#line 1 %q\n", d)
			}
			all.WriteString(ds)
		}
		fmt.Fprintf(&all, "\n#line 1 %q\n", file)
		all.WriteString(src)
		name, src = deps[0], all.String()
	}
	lib, err := b.dev.NewLibrary(file, CompileSource(name, src), CompileOptions(file))
	if err != nil {
		return nil, fmt.Errorf("metal: compiling %s: %w: %w", file, op.ErrBackend, err)
	}
	b.libs[file] = lib
	return lib, nil
}

// pipeline returns the cached pipeline of kernel fn in file specialised with constants.
func (b *Backend) pipeline(file, fn string, constants []mtl.Constant) (mtl.Pipeline, error) {
	var key strings.Builder
	fmt.Fprintf(&key, "%s:%s", file, fn)
	for _, c := range constants {
		fmt.Fprintf(&key, ":%d=%d/%d", c.Index, c.Type, c.Value)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.pipes[key.String()]; ok {
		return p, nil
	}
	if err := checkPipeline(file, fn, constants); err != nil {
		return nil, err
	}
	lib, err := b.library(file)
	if err != nil {
		return nil, err
	}
	p, err := lib.Pipeline(fn, constants)
	if err != nil {
		return nil, fmt.Errorf("metal: pipeline %s: %w: %w", fn, op.ErrBackend, err)
	}
	// The kernels index lanes and simdgroups as tid % 32 and tid / 32.
	if w := p.ThreadExecutionWidth(); w != 32 {
		p.Release()
		return nil, fmt.Errorf("metal: pipeline %s: %w: SIMD width %d, the kernels need 32", fn, op.ErrUnsupported, w)
	}
	b.pipes[key.String()] = p
	return p, nil
}

func (b *Backend) record(variant string, p mtl.Pipeline, tgMem int) {
	tg := p.StaticThreadgroupMemoryLength() + (tgMem+15)/16*16
	b.mu.Lock()
	st, ok := b.ran[variant]
	if !ok {
		st = &VariantStat{Variant: variant, Kernel: p.Name()}
		b.ran[variant] = st
	}
	st.Dispatches++
	st.ThreadgroupBytes = max(st.ThreadgroupBytes, tg)
	b.mu.Unlock()
}

// autoreleasePool runs fn inside the device's autorelease pool (mtl.AutoreleasePooler), or
// directly on a device without one (the emulator).
func (b *Backend) autoreleasePool(fn func()) {
	if p, ok := b.dev.(mtl.AutoreleasePooler); ok {
		p.AutoreleasePool(fn)
		return
	}
	fn()
}

// boolConst and intConst build function constants.
func boolConst(index int, v bool) mtl.Constant {
	c := mtl.Constant{Index: index, Type: mtl.Bool}
	if v {
		c.Value = 1
	}
	return c
}

func intConst(index, v int) mtl.Constant {
	return mtl.Constant{Index: index, Type: mtl.Int, Value: uint32(int32(v))}
}

// maxElems is the largest element count a kernel may index with 32-bit offsets.
const maxElems = math.MaxInt32

// guard32 checks that every count fits the kernels' 32-bit offsets.
func guard32(opName string, counts ...int) error {
	for _, n := range counts {
		if n < 0 || n > maxElems {
			return fmt.Errorf("%s: %w: %d elements exceed the kernels' 32-bit offsets", opName, op.ErrShape, n)
		}
	}
	return nil
}

// mtlConst is a function constant value; mtlBuffer a device buffer.
type (
	mtlConst    = mtl.Constant
	mtlBuffer   = mtl.Buffer
	mtlPipeline = mtl.Pipeline
)
