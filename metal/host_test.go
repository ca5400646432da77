package metal

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stratakernels/strata/emu"
	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// constKernel is a kernel with one int function constant, for the error-kind tests.
const constKernel = `#include <metal_stdlib>
using namespace metal;
constant int fc_n [[function_constant(0)]];
kernel void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    y[i] = float(fc_n);
}
`

// TestFunctionErrorKinds: a kernel the library lacks fails with mtl.ErrNoFunction and a bad
// function constant (float given for an int) with mtl.ErrCompile, never the other, on the
// emulator; on Metal the same split comes from the NSError of
// newFunctionWithName:constantValues:error: (functionErrorKind, the darwin device's only
// classification): FunctionNotFound (5) is the missing function, CompileFailure (3) and
// everything else a compile failure.
func TestFunctionErrorKinds(t *testing.T) {
	_, dev := backendOn(t, emu.Options{Threads: 1})
	lib, err := dev.NewLibrary("fc.metal", constKernel, CompileOptions("fc.metal"))
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Release()
	_, err = lib.Pipeline("nope", []mtl.Constant{intConst(0, 3)})
	if !errors.Is(err, mtl.ErrNoFunction) || errors.Is(err, mtl.ErrCompile) {
		t.Errorf("missing kernel: %v, want mtl.ErrNoFunction only", err)
	}
	_, err = lib.Pipeline("k", []mtl.Constant{{Index: 0, Type: mtl.Float, Value: 0x3f800000}})
	if !errors.Is(err, mtl.ErrCompile) || errors.Is(err, mtl.ErrNoFunction) {
		t.Errorf("float constant for an int: %v, want mtl.ErrCompile only", err)
	}
	p, err := lib.Pipeline("k", []mtl.Constant{intConst(0, 3)})
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	for _, c := range []struct {
		domain string
		code   int
		want   error
	}{
		{mtlLibraryErrorDomain, mtlLibraryErrorFunctionNotFound, mtl.ErrNoFunction},
		{mtlLibraryErrorDomain, mtlLibraryErrorCompileFailure, mtl.ErrCompile},
		{mtlLibraryErrorDomain, 1, mtl.ErrCompile},                              // Unsupported
		{"NSCocoaErrorDomain", mtlLibraryErrorFunctionNotFound, mtl.ErrCompile}, // another domain's 5
		{"", -1, mtl.ErrCompile}, // no NSError
	} {
		if got := functionErrorKind(c.domain, c.code); got != c.want {
			t.Errorf("NSError %s %d: %v, want %v", c.domain, c.code, got, c.want)
		}
	}
}

// TestBackendCloseReleases: a Backend that ran ops holds libraries and pipelines on its device;
// after the tensors, weights and scratch are released and the Backend is closed, the emulator
// counts no live object, and a closed Backend builds nothing.
func TestBackendCloseReleases(t *testing.T) {
	b, dev := backendOn(t, emu.Options{Threads: 1})
	x, y := optest.Floats(1, 3*8, 1), make([]float32, 3*5)
	w := randMatrix(t, 2, 5, 8, op.BF16, 0.5)
	a := op.MatMul{Y: f32(y), X: f32(x), T: 3, W: w}
	exec(t, b, func(p op.Pass) error { return p.MatMul(a) }, &a)
	if l := dev.Live(); l.Libraries == 0 || l.Pipelines == 0 {
		t.Fatalf("after a MatMul: %v live, want a library and a pipeline", l)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if l := dev.Live(); l.Total() != 0 {
		t.Fatalf("after Close: %v live", l)
	}
	exec2 := func() error {
		_, err := op.Exec(b, func(p op.Pass) error { return p.MatMul(a) }, &a)
		return err
	}
	if err := exec2(); !errors.Is(err, op.ErrBackend) {
		t.Errorf("MatMul on a closed Backend: %v, want op.ErrBackend", err)
	}
	if l := dev.Live(); l.Total() != 0 {
		t.Fatalf("after an op on the closed Backend: %v live", l)
	}
}

// noEncoderDevice's command buffers cannot create an encoder (as Metal's computeCommandEncoder
// may return nil).
type noEncoderDevice struct{ mtl.Device }

type noEncoderCB struct{ mtl.CommandBuffer }

func (d noEncoderDevice) NewCommandBuffer() (mtl.CommandBuffer, error) {
	cb, err := d.Device.NewCommandBuffer()
	if err != nil {
		return nil, err
	}
	return noEncoderCB{cb}, nil
}

func (noEncoderCB) ComputeEncoder() (mtl.ComputeEncoder, error) {
	return nil, errors.New("computeCommandEncoder returned nil: " + mtl.ErrExecution.Error())
}

// TestEncoderFailureReleasesCommandBuffer: a command buffer whose encoder cannot be created is
// released (abandoned) by Commit, which reports the failure.
func TestEncoderFailureReleasesCommandBuffer(t *testing.T) {
	_, dev := backendOn(t, emu.Options{Threads: 1})
	b, err := New(noEncoderDevice{dev})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	x, y := optest.Floats(1, 3*8, 1), make([]float32, 3*5)
	a := op.MatMul{Y: f32(y), X: f32(x), T: 3, W: randMatrix(t, 2, 5, 8, op.BF16, 0.5)}
	if _, err := op.Exec(b, func(p op.Pass) error { return p.MatMul(a) }, &a); !errors.Is(err, op.ErrBackend) {
		t.Fatalf("MatMul without an encoder: %v, want op.ErrBackend", err)
	}
	if n := dev.Live().CommandBuffers; n != 0 {
		t.Errorf("%d command buffers live after the failed Commit", n)
	}
}

// TestProbe: the emulator passes the probe (and it leaves nothing live); a device of another GPU
// family (an Intel Mac's) and one whose compiler refuses MSL 3.1 (macOS 13) fail it, saying why.
func TestProbe(t *testing.T) {
	_, dev := backendOn(t, emu.Options{Threads: 1})
	if err := Probe(dev); err != nil {
		t.Fatalf("emulator: %v", err)
	}
	if l := dev.Live(); l.Total() != 0 {
		t.Errorf("after the probe: %v live", l)
	}
	for _, c := range []struct {
		dev  mtl.Device
		want string
	}{
		{familyDevice{dev, nil}, "family Apple7"},
		{familyDevice{dev, []mtl.GPUFamily{mtl.FamilyApple7}}, ""},
		{oldCompilerDevice{dev}, "does not compile the kernels' language (MSL 3.1"},
	} {
		err := Probe(c.dev)
		if c.want == "" {
			if err != nil {
				t.Errorf("%T: %v, want nil", c.dev, err)
			}
			continue
		}
		if !errors.Is(err, op.ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T: %v, want op.ErrUnsupported saying %q", c.dev, err, c.want)
		}
	}
}

// familyDevice reports the GPU families it is given (mtl.FamilyReporter).
type familyDevice struct {
	mtl.Device
	families []mtl.GPUFamily
}

func (d familyDevice) SupportsFamily(f mtl.GPUFamily) bool { return slices.Contains(d.families, f) }

// oldCompilerDevice compiles only what macOS 13's Metal compiler does: up to MSL 3.0.
type oldCompilerDevice struct{ mtl.Device }

func (d oldCompilerDevice) NewLibrary(name, source string, opts mtl.CompileOptions) (mtl.Library, error) {
	if opts.LanguageVersion > 3<<16 {
		return nil, fmt.Errorf("%s: Compiler encountered an internal error (language version %s unsupported): %w", name, opts.LanguageVersion, mtl.ErrCompile)
	}
	return d.Device.NewLibrary(name, source, opts)
}

// countCBDevice counts the command buffers made on it.
type countCBDevice struct {
	mtl.Device
	n *int
}

func (d countCBDevice) NewCommandBuffer() (mtl.CommandBuffer, error) {
	*d.n++
	return d.Device.NewCommandBuffer()
}

// TestSplitCommandBuffersBitwise: a Pass of chained MatMuls (each reading the one before) run
// with a budget of one dispatch per command buffer, and with a thread budget below one dispatch,
// gives the bits of the same Pass in one command buffer, and makes one command buffer per
// dispatch; every command buffer is released.
func TestSplitCommandBuffersBitwise(t *testing.T) {
	_, dev := backendOn(t, emu.Options{Threads: 1})
	run := func(budget CommandBufferBudget) ([]float32, int) {
		n := 0
		b, err := New(countCBDevice{dev, &n})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := b.SetCommandBufferBudget(budget); err != nil {
			t.Fatal(err)
		}
		x := f32(optest.Floats(1, 3*8, 1))
		y := make([]float32, 3*5)
		h1, h2, h3 := f32(make([]float32, 3*8)), f32(make([]float32, 3*8)), f32(y)
		w1 := randMatrix(t, 2, 8, 8, op.BF16, 0.5)
		w2 := randMatrix(t, 3, 8, 8, op.BF16, 0.5)
		w3 := randMatrix(t, 4, 5, 8, op.BF16, 0.5)
		a1 := op.MatMul{Y: h1, X: x, T: 3, W: w1}
		a2 := op.MatMul{Y: h2, X: h1, T: 3, W: w2}
		a3 := op.MatMul{Y: h3, X: h2, T: 3, W: w3}
		if _, err := op.Exec(b, func(p op.Pass) error {
			return errors.Join(p.MatMul(a1), p.MatMul(a2), p.MatMul(a3))
		}, &a1, &a2, &a3); err != nil {
			t.Fatal(err)
		}
		return y, n
	}
	want, n := run(DefaultCommandBufferBudget)
	if n != 1 {
		t.Fatalf("default budget: %d command buffers, want 1", n)
	}
	if !slices.ContainsFunc(want, func(v float32) bool { return v != 0 }) {
		t.Fatal("the chained MatMuls gave all zeros")
	}
	for _, budget := range []CommandBufferBudget{{Dispatches: 1, Threads: 1 << 24}, {Dispatches: 64, Threads: 1}} {
		got, n := run(budget)
		if n != 3 {
			t.Errorf("budget %+v: %d command buffers, want 3 (one per dispatch)", budget, n)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("budget %+v: y[%d] = %v, one command buffer gives %v", budget, i, got[i], want[i])
			}
		}
	}
	if l := dev.Live(); l.CommandBuffers != 0 {
		t.Errorf("%d command buffers live", l.CommandBuffers)
	}
	if err := testBackend(t).SetCommandBufferBudget(CommandBufferBudget{Dispatches: 0, Threads: 1}); !errors.Is(err, op.ErrInvalidArgument) {
		t.Errorf("zero dispatches: %v, want op.ErrInvalidArgument", err)
	}
}

// TestAttentionNonFinite: the Metal attention kernels (qsa_flash, the default; qsa_attn_mm;
// qsa_flash_ph; the Metal 4 tensor-op qsa_flash_tensor and qsa_attn_tensor, run on the emulator
// through Prefer) keep op.Attention's NaN/Inf rule, checked by the CPU's test
// (optest.AttentionNonFinite): a non-finite key or value row reaches exactly the rows that attend
// it, a masked value row is never multiplied.
func TestAttentionNonFinite(t *testing.T) {
	if testing.Short() {
		t.Skip("about 500 emulated attention calls; skipped with -short")
	}
	for _, kernel := range []string{attnFlashKernel, attnMMKernel, attnFlashPHKernel, attnTensorKernel, attnTensorPFKernel} {
		t.Run(kernel, func(t *testing.T) {
			b := testBackend(t)
			if err := b.Prefer("attention", kernel); err != nil {
				t.Fatal(err)
			}
			tol := 1e-5 // qsa_flash_ph and qsa_flash_tensor round the probabilities to half
			if kernel == attnFlashPHKernel || kernel == attnTensorKernel {
				tol = halfP["Attention.o"]
			}
			optest.AttentionNonFinite(t, optest.AttentionNonFiniteCases(), tol, func(o, lse, q, k, v []float32, p op.AttnParams, sel *op.Selection) error {
				a := op.Attention{O: f32(o), LSE: f32(lse), Q: f32(q), K: f32(k), V: f32(v), P: p}
				if sel != nil {
					a.Sel, a.Tok = sel, i32(sel.Tokens)
				}
				_, err := op.Exec(b, func(p op.Pass) error { return p.Attention(a) }, &a)
				return err
			})
			if !strings.Contains(strings.Join(b.Variants(), " "), kernel) {
				t.Fatalf("%s did not run: %v", kernel, b.Variants())
			}
		})
	}
}

// TestPipelineThreadLimit: on a device whose pipelines allow only 64 threads per threadgroup
// (emu.Options.MaxThreadsPerThreadgroup, as Apple's compiler lowers the limit of register-heavy
// kernels), the kernels whose width is free (one thread per element, or thread-strided rows)
// run at that width and pass their op cases; the quantized GEMMs fall back from their tiled
// kernels to the matrix-vector ones; and a kernel that needs its full width without a fallback
// (the 16-bit GEMM's 128-thread simdgroup tiles) is refused naming both figures, before
// anything runs.
func TestPipelineThreadLimit(t *testing.T) {
	b, _ := backendOn(t, emu.Options{Threads: 1, MaxThreadsPerThreadgroup: 64})
	defer b.Close()
	ops := []string{"Add", "SigmoidMul", "SwiGLU", "Copy", "Embed", "MoECombine", "RMSNorm", "GDNPost", "QSAPrep"}
	optest.Run(t, b, optest.Options{Short: true, TolScale: OpTolScale, Filter: optest.OpsFilter(ops)})
	v := strings.Join(b.Variants(), " ")
	for _, want := range []string{"copy_f32_tg64", "rms_norm_f32_s1_tg64", "embed_", "moe_comb"} {
		if !strings.Contains(v, want) {
			t.Errorf("variant %q did not run: %s", want, v)
		}
	}
	if strings.Contains(v, "tg256") || strings.Contains(v, "tg128") || strings.Contains(v, "tg96") {
		t.Errorf("a variant wider than the limit ran: %s", v)
	}
	// The quantized GEMMs' tiled kernels (128 threads) fall back to their matrix-vector kernels
	// (64 threads) and pass their cases; the log says so.
	var logs []string
	b.SetLog(func(msg string) { logs = append(logs, msg) })
	b.ResetVariants()
	optest.Run(t, b, optest.Options{Short: true, TolScale: OpTolScale, Filter: optest.OpsFilter([]string{"MatMul/q", "MoEExperts/q4_g32_F16"})})
	v = strings.Join(b.Variants(), " ")
	if !strings.Contains(v, "qmv_affine") || strings.Contains(v, "qmm_affine") {
		t.Errorf("quantized GEMMs on 64-thread pipelines ran %s, want qmv_affine only", v)
	}
	if l := strings.Join(logs, "\n"); !strings.Contains(l, "qmm_affine needs 128 threads per threadgroup, its pipeline allows 64") {
		t.Errorf("the fallback is not logged: %q", l)
	}
	x, y := optest.Floats(1, 3*8, 1), make([]float32, 3*5)
	a := op.MatMul{Y: f32(y), X: f32(x), T: 3, W: randMatrix(t, 2, 5, 8, op.BF16, 0.5)}
	_, err := op.Exec(b, func(p op.Pass) error { return p.MatMul(a) }, &a)
	if !errors.Is(err, op.ErrUnsupported) || !strings.Contains(err.Error(), "128 threads per threadgroup, pipeline allows 64") {
		t.Errorf("MatMul on 64-thread pipelines: %v, want op.ErrUnsupported naming 128 and 64", err)
	}
}
