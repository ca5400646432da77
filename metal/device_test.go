package metal

import (
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// fakeDevice is the emulator seen as a GPU: it is not "emulated", it reports the GPU families it
// is given, counts autorelease pools (mtl.AutoreleasePooler), records the compile options of
// every library, and its command buffers report a GPU time (mtl.GPUTimer) and record the pool
// each of their calls ran in. It tests the host code's handling of what only Apple's Metal
// reports.
type fakeDevice struct {
	mtl.Device
	families []mtl.GPUFamily
	gpuTime  time.Duration

	mu     sync.Mutex
	depth  int
	pushes int
	pops   int
	pool   int // id of the innermost open pool (0: none)
	libs   map[string]mtl.CompileOptions
	cbs    []*fakeCB
}

func newFakeDevice(t *testing.T, families ...mtl.GPUFamily) *fakeDevice {
	t.Helper()
	testBackend(t) // opens the shared emulator
	return &fakeDevice{Device: emuDev, families: families, gpuTime: 1234567 * time.Nanosecond, libs: map[string]mtl.CompileOptions{}}
}

func (d *fakeDevice) SupportsFamily(f mtl.GPUFamily) bool {
	for _, g := range d.families {
		if g == f {
			return true
		}
	}
	return false
}

func (d *fakeDevice) AutoreleasePool(fn func()) {
	d.mu.Lock()
	d.depth++
	d.pushes++
	outer := d.pool
	d.pool = d.pushes
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.depth--
		d.pops++
		d.pool = outer
		d.mu.Unlock()
	}()
	fn()
}

func (d *fakeDevice) currentPool() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pool
}

func (d *fakeDevice) NewLibrary(name, source string, opts mtl.CompileOptions) (mtl.Library, error) {
	d.mu.Lock()
	d.libs[name] = opts
	d.mu.Unlock()
	return d.Device.NewLibrary(name, source, opts)
}

func (d *fakeDevice) NewCommandBuffer() (mtl.CommandBuffer, error) {
	cb, err := d.Device.NewCommandBuffer()
	if err != nil {
		return nil, err
	}
	f := &fakeCB{CommandBuffer: cb, dev: d, pools: map[string]int{"create": d.currentPool()}}
	d.mu.Lock()
	d.cbs = append(d.cbs, f)
	d.mu.Unlock()
	return f, nil
}

// fakeCB records the pool of each of its calls.
type fakeCB struct {
	mtl.CommandBuffer
	dev   *fakeDevice
	pools map[string]int
}

func (c *fakeCB) ComputeEncoder() (mtl.ComputeEncoder, error) {
	c.pools["encoder"] = c.dev.currentPool()
	return c.CommandBuffer.ComputeEncoder()
}

func (c *fakeCB) Commit() {
	c.pools["commit"] = c.dev.currentPool()
	c.CommandBuffer.Commit()
}

func (c *fakeCB) Wait() error {
	c.pools["wait"] = c.dev.currentPool()
	return c.CommandBuffer.Wait()
}

func (c *fakeCB) Release() {
	c.pools["release"] = c.dev.currentPool()
	c.CommandBuffer.Release()
}

func (c *fakeCB) GPUTime() time.Duration { return c.dev.gpuTime }

// TestAutoreleasePools: every command buffer's whole life (creation, encoder, commit, wait,
// release) runs inside one autorelease pool of its own, pushes and pops pair up, and an
// abandoned or empty Pass creates no command buffer.
func TestAutoreleasePools(t *testing.T) {
	d := newFakeDevice(t)
	b, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	x, y := optest.Floats(1, 3*8, 1), make([]float32, 3*5)
	w := randMatrix(t, 2, 5, 8, op.BF16, 0.5)
	for range 3 {
		a := op.MatMul{Y: f32(y), X: f32(x), T: 3, W: w}
		exec(t, b, func(p op.Pass) error { return p.MatMul(a) }, &a)
	}
	ws, s := b.NewWeights(op.WeightOptions{}), b.NewScratch()
	defer ws.Release()
	defer s.Release()
	p, err := b.Begin(ws, s)
	if err != nil {
		t.Fatal(err)
	}
	yt, _ := b.NewTensor(op.F32, 15)
	xt, _ := b.NewTensor(op.F32, 24)
	defer b.Free(yt)
	defer b.Free(xt)
	if err := p.MatMul(op.MatMul{Y: yt, X: xt, T: 3, W: w}); err != nil {
		t.Fatal(err)
	}
	p.Abandon()
	if p, err = b.Begin(ws, s); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.cbs) != 3 {
		t.Fatalf("%d command buffers, want 3 (one per committed non-empty pass)", len(d.cbs))
	}
	if d.pushes != d.pops || d.depth != 0 {
		t.Errorf("%d pushes, %d pops, depth %d after the passes", d.pushes, d.pops, d.depth)
	}
	seen := map[int]bool{}
	for i, cb := range d.cbs {
		id := cb.pools["create"]
		if id == 0 {
			t.Errorf("command buffer %d created outside an autorelease pool", i)
		}
		if seen[id] {
			t.Errorf("command buffer %d shares pool %d with another", i, id)
		}
		seen[id] = true
		for _, call := range []string{"encoder", "commit", "wait", "release"} {
			if got, ok := cb.pools[call]; !ok || got != id {
				t.Errorf("command buffer %d: %s in pool %d (present %t), created in pool %d", i, call, got, ok, id)
			}
		}
	}
}

// TestCompileOptionsReachDevice: every kernel file reaches the device with the options
// CompileOptions gives it (MSL 3.1, or 4.0 for the tensor-op files; safe math, precise
// functions), and unknown files have none.
func TestCompileOptionsReachDevice(t *testing.T) {
	d := newFakeDevice(t, mtl.FamilyMetal4)
	b, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Sources() {
		if err := b.Compile(f); err != nil {
			t.Fatal(err)
		}
		got := d.libs[f]
		want := mtl.CompileOptions{LanguageVersion: mtl.Language3_1, MathMode: mtl.MathSafe, PreciseFunctions: true}
		if tensorFiles[f] {
			want.LanguageVersion = mtl.Language4_0
		}
		if got != want {
			t.Errorf("%s compiled with %v, want %v", f, got, want)
		}
	}
	for f := range tensorFiles {
		if _, ok := d.libs[f]; !ok {
			t.Errorf("tensor-op file %s is not among the sources", f)
		}
	}
	if err := b.Compile("nope.metal"); !errors.Is(err, op.ErrInvalidArgument) {
		t.Errorf("unknown file: %v", err)
	}
}

// TestCompileSourceInlinesHeaders: a quoted include of an embedded header is replaced by the
// header's text, line numbering resumes after it (also in a file the library appended under a
// #line directive), the emulator compiles the result with the header's helpers and cites the
// including file's own lines, and headers cannot be replaced with SetSource.
func TestCompileSourceInlinesHeaders(t *testing.T) {
	common, err := Source("common.h")
	if err != nil {
		t.Fatal(err)
	}
	got := CompileSource("x.metal", "a\n#include \"common.h\"\nb\n#line 7 \"y.metal\"\n#include \"common.h\"\nc\n")
	want := "\n#line 1 \"x.metal\"\na\n#line 1 \"common.h\"\n" + common + "#line 3 \"x.metal\"\nb\n#line 7 \"y.metal\"\n" +
		"#line 1 \"common.h\"\n" + common + "#line 8 \"y.metal\"\nc\n"
	if !strings.HasSuffix(got, want) {
		t.Errorf("CompileSource ends\n%s\nwant\n%s", got[max(0, len(got)-len(want)):], want)
	}
	if g := CompileSource("x.metal", "#include \"nope.h\"\n"); !strings.HasSuffix(g, "\n#line 1 \"x.metal\"\n#include \"nope.h\"\n") {
		t.Errorf("an include of no embedded header was changed: %q", g[len(g)-60:])
	}
	// Line 4 uses common.h's sigmoid1; line 5 names nothing defined.
	src := "#include <metal_stdlib>\n#include \"common.h\"\nusing namespace metal;\n" +
		"kernel void k(device float* y [[buffer(0)]]) { y[0] = sigmoid1(y[0]);\n y[1] = undefined_name; }\n"
	b := testBackend(t)
	_, err = b.dev.NewLibrary("x.metal", CompileSource("x.metal", src), CompileOptions("x.metal"))
	if !errors.Is(err, mtl.ErrCompile) || !strings.Contains(err.Error(), "x.metal:5") || strings.Contains(err.Error(), "x.metal:4") {
		t.Errorf("compile error %v, want one at x.metal:5 only", err)
	}
	if err := b.SetSource("common.h", common); !errors.Is(err, op.ErrInvalidArgument) {
		t.Errorf("SetSource of a header: %v, want ErrInvalidArgument", err)
	}
}

// TestGPUTiming: on a device whose command buffers report GPU time (Metal's GPUStartTime ..
// GPUEndTime) and no per-dispatch time, Commit reports that time as Total with PerStage false.
func TestGPUTiming(t *testing.T) {
	d := newFakeDevice(t)
	b, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	x, y := optest.Floats(3, 4*8, 1), make([]float32, 4*6)
	a := op.MatMul{Y: f32(y), X: f32(x), T: 4, W: randMatrix(t, 4, 6, 8, op.F32, 0.5)}
	tm, err := op.Exec(b, func(p op.Pass) error {
		p.Stage(2)
		return p.MatMul(a)
	}, &a)
	if err != nil {
		t.Fatal(err)
	}
	if tm.PerStage || tm.Total != d.gpuTime || len(tm.Stage) != 0 {
		t.Errorf("timing %+v, want Total %v from the command buffer, PerStage false", tm, d.gpuTime)
	}
	// The emulator itself times each dispatch: per stage.
	tm, err = op.Exec(testBackend(t), func(p op.Pass) error {
		p.Stage(2)
		return p.MatMul(a)
	}, &a)
	if err != nil {
		t.Fatal(err)
	}
	if !tm.PerStage || len(tm.Stage) != 3 || tm.Stage[2] != tm.Total || tm.Total <= 0 {
		t.Errorf("emulator timing %+v, want the dispatch's time under stage 2", tm)
	}
}

// TestPipelineTable: the pipeline table names every kernel the sources define and only those,
// and the backend refuses a pipeline outside it.
func TestPipelineTable(t *testing.T) {
	defined := map[string]bool{}
	for _, f := range Sources() {
		src, err := Source(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kernelNames(src) {
			defined[f+":"+k] = true
		}
	}
	listed := map[string]bool{}
	for _, s := range Pipelines() {
		listed[s.File+":"+s.Kernel] = true
	}
	for k := range defined {
		if !listed[k] {
			t.Errorf("kernel %s is not in the pipeline table", k)
		}
	}
	for k := range listed {
		if !defined[k] {
			t.Errorf("pipeline table entry %s names no kernel of its file", k)
		}
	}
	b := testBackend(t)
	if _, err := b.pipeline("gemm.metal", "gemm_w32", []mtl.Constant{boolConst(0, true)}); !errors.Is(err, op.ErrBackend) {
		t.Errorf("gemm_w32 with gemm_bf16=1: %v, want a refusal", err)
	}
	if got := (PipelineSpec{File: "gemm.metal", Kernel: "gemm_w16", Constants: []mtl.Constant{boolConst(0, true)}}).Name(); got != "gemm_w16[gemm_bf16=1]" {
		t.Errorf("spec name %q", got)
	}
}

// kernelDef matches a kernel function's definition at the start of a line.
var kernelDef = regexp.MustCompile(`(?m)^kernel void (\w+)\(`)

// kernelNames lists the kernel functions a source defines.
func kernelNames(src string) []string {
	var out []string
	for _, m := range kernelDef.FindAllStringSubmatch(src, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestWeightsIgnoreWidenBudget: the Metal store keeps every matrix as given (Prepare returns it)
// and logs once per store that a non-zero WidenBudget is ignored; a zero budget logs nothing.
func TestWeightsIgnoreWidenBudget(t *testing.T) {
	b, err := New(newFakeDevice(t))
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	b.SetLog(func(msg string) { logs = append(logs, msg) })
	w := randMatrix(t, 2, 5, 8, op.BF16, 0.5)
	for _, budget := range []int64{0, -1} {
		logs = nil
		ws := b.NewWeights(op.WeightOptions{WidenBudget: budget})
		for range 2 {
			got, err := ws.Prepare(w)
			if err != nil || got != w {
				t.Fatalf("budget %d: Prepare returned %p, %v; want the matrix itself", budget, got, err)
			}
		}
		ws.Release()
		if want := min(int(-budget), 1); len(logs) != want || (want == 1 && !strings.Contains(logs[0], "WidenBudget -1 ignored")) {
			t.Errorf("budget %d: log %q", budget, logs)
		}
	}
}
