package optest

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stratakernels/strata/op"
)

// Options selects and tunes a run.
type Options struct {
	// Short runs only the cases marked Short in the tables: per op every dtype and flag
	// combination at one or two token counts (mostly T = 1 and 65), without the long sequences
	// (T = 300, 2050) and most real-width shapes. It is meant for slow backends (the MSL
	// emulator runs about 100x slower than the CPU backend) and for `go test -short`.
	Short bool
	// Filter, when set, runs only the cases whose full name it accepts. Full names are
	// "Op/case", e.g. "MatMul/T65_N97_K130_BF16", "GDNScan/r1_dk12_dv20_T3/chunked",
	// "Attention/qsa/T1_pos0_h4_dim128_r4_b32" or "TopKRoute/bad/K_above_E" (the bad-argument
	// cases of an op are "Op/bad/name").
	Filter func(name string) bool
	// Before, when set, runs at the start of each case's subtest with the case's full name (the
	// Metal tests use it to Prefer a kernel variant); After runs at its end (to check the
	// variants that ran).
	Before, After func(t *testing.T, name string)
	// TolScale multiplies every default tolerance (0 means 1): a backend that computes in
	// float32 with other summation orders than the CPU backend needs more.
	TolScale float64
	// Tol overrides the tolerance of one output ("Attention.o") or of every output of an op
	// ("Attention"), replacing default * TolScale. Tolerances bound max |got - want| / max |want|
	// against the float64 reference; Tolerances lists the defaults.
	Tol map[string]float64
	// Observe, when set, is called for every float output a case compares with its reference,
	// after the comparison (the Metal self-test compares kernel variants bitwise through it and
	// attributes the errors to the kernels that ran).
	Observe func(t *testing.T, o Output)
	// NoValueChecks skips the bad-argument cases whose error comes from tensor contents rather
	// than shapes (names "value_*": a token id outside the table, a slot row outside the expert
	// rows, an expert index outside [-1, E), a NaN logit, an unsorted selection). The op docs
	// leave those checks to the host functions (CheckTokens, CheckSlots, CheckIdx, CheckLogits,
	// CheckIDs, Selection.CheckTokens); the CPU backend makes them in every op.
	NoValueChecks bool
	// NoQuant skips the quantized-weight cases (cases_quant.go: subtests "Op/q<bits>_..."), for
	// a backend whose kernels do not read op.QAffine weights yet.
	NoQuant bool
}

// Output is one float output of a case as Options.Observe sees it.
type Output struct {
	// Case is the case's full name ("MatMul/T65_N97_K130_BF16"), Name the output's ("y").
	Case, Name string
	// Got is the backend's result (a copy the observer may keep).
	Got []float32
	// RelErr is max |got - want| / max |want| against the float64 reference, Tol its bound.
	RelErr, Tol float64
}

// tolerances are the default bounds on max |got - want| / max |want| per op output. They were
// set from the CPU backend's worst error over the whole table (the comments: AVX2 and portable
// kernel sets, x86-64), with a margin of 3-20x; each runner logs its worst error per output.
// The "tie" entries are relative distances of float64 scores within which a backend may order
// two experts or QSA blocks differently from the reference (the CPU swapped none).
var tolerances = map[string]float64{
	"MatMul.y":           5e-6, // 7.3e-7
	"RMSNorm.y":          1e-6, // 4.9e-8
	"Add.h":              1e-6, // 6.9e-8
	"SigmoidMul.o":       1e-6, // 9.2e-8
	"SwiGLU.h":           1e-6, // 1.2e-7
	"RowSigmoidScale.x":  1e-6, // 7.0e-8
	"TopKRoute.w":        1e-6, // 4.5e-8
	"TopKRoute.tie":      1e-5,
	"MoEExperts.ye":      5e-6, // 9.5e-7
	"MoECombine.out":     1e-6, // 1.2e-7
	"GRRead.x":           2e-6, // 1.7e-7
	"GRRead.beta":        2e-6, // 2.2e-7
	"GRWrite.H":          1e-6, // 8.0e-8
	"GRWrite.Hn":         1e-6, // 7.2e-8
	"GRApplyMoEC.H":      1e-6, // 8.7e-8
	"GRApplyMoEC.Hn":     1e-6, // 8.8e-8
	"PLEApply.H":         2e-6, // 2.4e-7
	"PLEApply.convState": 2e-6, // 1.6e-7
	"GDNPre.q":           1e-6, // 1.3e-7
	"GDNPre.k":           1e-6, // 1.3e-7
	"GDNPre.v":           1e-6, // 1.7e-7
	"GDNPre.g":           1e-6, // 4.9e-8
	"GDNPre.beta":        1e-6, // 4.1e-8
	"GDNPre.convState":   0,    // the last inputs, copied: exact
	"GDNScan.o":          5e-6, // 4.5e-7
	"GDNScan.state":      5e-6, // 2.2e-7
	"GDNPost.y":          1e-6, // 1.4e-7
	"QSAPrep.q":          1e-6, // 7.9e-8
	"QSAPrep.k":          1e-6, // 8.5e-8
	"QSAIndex.iq":        1e-6, // 7.2e-8
	"QSAIndex.tie":       1e-5,
	"Attention.o":        1e-5, // 2.2e-6
	"Attention.lse":      2e-6, // 4.1e-7
}

// Tolerances returns a copy of the default tolerances, keyed "Op.output".
func Tolerances() map[string]float64 {
	m := make(map[string]float64, len(tolerances))
	for k, v := range tolerances {
		m[k] = v
	}
	return m
}

// tol is the tolerance of output out of opName under o.
func (o Options) tol(opName, out string) float64 {
	key := opName + "." + out
	if v, ok := o.Tol[key]; ok {
		return v
	}
	if v, ok := o.Tol[opName]; ok {
		return v
	}
	def, ok := tolerances[key]
	if !ok {
		panic("optest: no default tolerance for " + key)
	}
	if o.TolScale > 0 {
		def *= o.TolScale
	}
	return def
}

// Run runs every op's cases and bad-argument table on be as subtests named after the op
// ("MatMul", "RMSNorm", ...), each against its float64 reference.
func Run(t *testing.T, be op.Backend, o Options) {
	for _, r := range runners {
		t.Run(r.name, func(t *testing.T) { r.run(t, be, o) })
	}
}

// runners lists one runner per op of op.Pass, in the order of the interface.
var runners = []struct {
	name string
	run  func(*testing.T, op.Backend, Options)
}{
	{"MatMul", RunMatMul}, {"RMSNorm", RunRMSNorm}, {"Add", RunAdd}, {"SigmoidMul", RunSigmoidMul},
	{"SwiGLU", RunSwiGLU}, {"RowSigmoidScale", RunRowSigmoidScale}, {"Copy", RunCopy}, {"Embed", RunEmbed},
	{"GRRead", RunGRRead}, {"GRWrite", RunGRWrite}, {"GRApplyMoEC", RunGRApplyMoEC},
	{"GDNPre", RunGDNPre}, {"GDNScan", RunGDNScan}, {"GDNPost", RunGDNPost},
	{"QSAPrep", RunQSAPrep}, {"QSAIndex", RunQSAIndex}, {"Attention", RunAttention},
	{"TopKRoute", RunTopKRoute}, {"MoEExperts", RunMoEExperts}, {"MoECombine", RunMoECombine},
	{"PLEApply", RunPLEApply},
}

// suite is one op's run: the options, and the worst error seen per output (logged at the end).
type suite struct {
	o     Options
	op    string
	worst map[string]float64
	cases int
	cur   string // the full name of the case running
}

func newSuite(t *testing.T, o Options, opName string) *suite {
	s := &suite{o: o, op: opName, worst: map[string]float64{}}
	t.Cleanup(func() {
		if s.cases == 0 {
			return
		}
		if len(s.worst) == 0 {
			t.Logf("%s: %d subtests (exact outputs only)", opName, s.cases)
			return
		}
		outs := make([]string, 0, len(s.worst))
		for k := range s.worst {
			outs = append(outs, k)
		}
		sort.Strings(outs)
		var b strings.Builder
		for _, k := range outs {
			fmt.Fprintf(&b, " %s %.2g (tolerance %.2g);", k, s.worst[k], o.tol(opName, k))
		}
		t.Logf("%s: %d subtests; worst max|got-want|/max|want|:%s", opName, s.cases, b.String())
	})
	return s
}

// runQ is run for a quantized-weight case (skipped under NoQuant).
func (s *suite) runQ(t *testing.T, name string, short bool, fn func(t *testing.T)) {
	t.Helper()
	if !s.o.NoQuant {
		s.run(t, name, short, fn)
	}
}

// OpsFilter is an Options.Filter that accepts the cases of the ops named in ops, without their
// bad-argument tables: an entry "MatMul" takes every "MatMul/..." case, an entry with a "/"
// ("MatMul/q") every case whose name starts with it.
func OpsFilter(ops []string) func(name string) bool {
	return func(name string) bool {
		for _, o := range ops {
			match := strings.HasPrefix(name, o+"/") || (strings.Contains(o, "/") && strings.HasPrefix(name, o))
			if match && !strings.Contains(name, "/bad/") {
				return true
			}
		}
		return false
	}
}

// entry is one case of an op's table, what both the test runners and the timing mode (Time)
// run: its subtest name (without the op), whether Options.Short keeps it, whether it reads
// QAffine weights (Options.NoQuant skips it), its nominal work (Case.Flops, Case.Bytes), and
// build, which allocates its tensors on e and returns the ops of one Pass and the check of
// their outputs after that Pass. build may run Passes of its own first (inputs computed by
// other ops); the references are computed in check.
type entry struct {
	name         string
	short, quant bool
	flops, bytes float64
	build        func(e *env) (call func(op.Pass) error, check func(t *testing.T, s *suite))
}

// runEntries runs each entry as a subtest: build, one Pass of call, check.
func (s *suite) runEntries(t *testing.T, be op.Backend, es []entry) {
	t.Helper()
	for _, en := range es {
		run := s.run
		if en.quant {
			run = s.runQ
		}
		run(t, en.name, en.short, func(t *testing.T) {
			e := newEnv(t, be)
			call, check := en.build(e)
			e.pass(call)
			check(t, s)
		})
	}
}

// run runs fn as the subtest name unless Short or Filter exclude it.
func (s *suite) run(t *testing.T, name string, short bool, fn func(t *testing.T)) {
	t.Helper()
	full := s.op + "/" + name
	if (s.o.Short && !short) || (s.o.Filter != nil && !s.o.Filter(full)) {
		return
	}
	s.cases++
	t.Run(name, func(t *testing.T) {
		s.cur = full
		if s.o.Before != nil {
			s.o.Before(t, full)
		}
		fn(t)
		if s.o.After != nil {
			s.o.After(t, full)
		}
	})
}

// close requires max |got - want| / max |want| (max |got - want| when want is all zero) to be
// within the output's tolerance, and every got finite where want is.
func (s *suite) close(t *testing.T, out string, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", out, len(got), len(want))
	}
	r := RelErr(got, want)
	s.worst[out] = max(s.worst[out], r)
	tol := s.o.tol(s.op, out)
	if !(r <= tol) {
		i := worstIndex(got, want)
		t.Errorf("%s: max|got-want|/max|want| = %.3g > %.2g (worst element %d: got %g, want %g)", out, r, tol, i, got[i], want[i])
	}
	if s.o.Observe != nil {
		s.o.Observe(t, Output{Case: s.cur, Name: out, Got: slices.Clone(got), RelErr: r, Tol: tol})
	}
}

// RelErr is max |got - want| / max |want| (max |got - want| when want is all zero); a got that
// is NaN or infinite where want is finite counts as an infinite error.
func RelErr(got []float32, want []float64) float64 {
	var md, mw float64
	for i, w := range want {
		g := float64(got[i])
		d := math.Abs(g - w)
		if math.IsNaN(d) || (math.IsInf(g, 0) && !math.IsInf(w, 0)) {
			return math.Inf(1)
		}
		md = max(md, d)
		mw = max(mw, math.Abs(w))
	}
	if mw == 0 {
		return md
	}
	return md / mw
}

func worstIndex(got []float32, want []float64) int {
	wi, wd := 0, -1.0
	for i, w := range want {
		d := math.Abs(float64(got[i]) - w)
		if math.IsNaN(d) {
			return i
		}
		if d > wd {
			wi, wd = i, d
		}
	}
	return wi
}

// exactF32 requires got to have want's bits.
func exactF32(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d = %g, want %g (bitwise)", what, i, got[i], want[i])
		}
	}
}

// exactI32 requires got to equal want.
func exactI32(t *testing.T, what string, got, want []int32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: element %d = %d, want %d", what, i, got[i], want[i])
		}
	}
}

// Canaries fill output tensors before an op, so that an element the op fails to write shows.
var (
	canaryF32 = math.Float32frombits(0x7fc0dead) // a quiet NaN
	canaryI32 = int32(math.MinInt32 + 0x5ead)
)

// tb is what a case's setup needs of its test: the subtest's *testing.T, or the timing mode's
// failure recorder (Time).
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// env holds one case's backend objects: its tensors, weight store and scratch arena, freed
// when the subtest ends (or when Time is done with the case).
type env struct {
	t     tb
	be    op.Backend
	w     op.Weights
	s     op.Scratch
	owned []op.Tensor
}

func newEnv(t *testing.T, be op.Backend) *env {
	e := openEnv(t, be, op.WeightOptions{})
	t.Cleanup(e.release)
	return e
}

func openEnv(t tb, be op.Backend, wo op.WeightOptions) *env {
	return &env{t: t, be: be, w: be.NewWeights(wo), s: be.NewScratch()}
}

// release frees the env's tensors, scratch and weights.
func (e *env) release() {
	for _, x := range e.owned {
		e.be.Free(x)
	}
	e.s.Release()
	e.w.Release()
}

// tensor allocates n elements of dt with be.NewTensor and checks its host view.
func (e *env) tensor(dt op.DType, n int) op.Tensor {
	e.t.Helper()
	x, err := e.be.NewTensor(dt, n)
	if err != nil {
		e.t.Fatalf("NewTensor(%v, %d): %v", dt, n, err)
	}
	e.owned = append(e.owned, x)
	e.checkView(x, dt, n)
	return x
}

func (e *env) checkView(x op.Tensor, dt op.DType, n int) {
	e.t.Helper()
	if x.DType() != dt || x.Len() != n {
		e.t.Fatalf("tensor is %v of %d elements, want %v of %d", x.DType(), x.Len(), dt, n)
	}
	if nv := max(len(x.F32()), len(x.I32())); n > 0 && nv != n {
		e.t.Fatalf("host view of a %v tensor of %d elements has %d", dt, n, nv)
	}
}

// f32 is a new F32 tensor holding x.
func (e *env) f32(x []float32) op.Tensor {
	e.t.Helper()
	tn := e.tensor(op.F32, len(x))
	copy(tn.F32(), x)
	return tn
}

// i32 is a new I32 tensor holding x.
func (e *env) i32(x []int32) op.Tensor {
	e.t.Helper()
	tn := e.tensor(op.I32, len(x))
	copy(tn.I32(), x)
	return tn
}

// scratchPrefix scopes the test's scratch names away from a backend's own temporaries.
const scratchPrefix = "optest/"

// out is the scratch tensor name of n F32 elements, filled with canaries.
func (e *env) out(name string, n int) op.Tensor {
	e.t.Helper()
	x, err := e.s.Tensor(scratchPrefix+name, op.F32, n)
	if err != nil {
		e.t.Fatalf("Scratch.Tensor(%q, F32, %d): %v", name, n, err)
	}
	e.checkView(x, op.F32, n)
	for i := range x.F32() {
		x.F32()[i] = canaryF32
	}
	return x
}

// outI32 is the scratch tensor name of n I32 elements, filled with canaries.
func (e *env) outI32(name string, n int) op.Tensor {
	e.t.Helper()
	x, err := e.s.Tensor(scratchPrefix+name, op.I32, n)
	if err != nil {
		e.t.Fatalf("Scratch.Tensor(%q, I32, %d): %v", name, n, err)
	}
	e.checkView(x, op.I32, n)
	for i := range x.I32() {
		x.I32()[i] = canaryI32
	}
	return x
}

// pass runs fn in one Pass and commits it; an op error abandons the Pass and fails the test.
func (e *env) pass(fn func(p op.Pass) error) {
	e.t.Helper()
	p, err := e.be.Begin(e.w, e.s)
	if err != nil {
		e.t.Fatalf("Begin: %v", err)
	}
	if err := fn(p); err != nil {
		p.Abandon()
		e.t.Fatalf("op: %v", err)
	}
	if _, err := p.Commit(); err != nil {
		e.t.Fatalf("Commit: %v", err)
	}
}

// f32s returns a copy of a tensor's host view (valid after Commit).
func f32s(x op.Tensor) []float32 { return slices.Clone(x.F32()) }

// i32s returns a copy of a tensor's host view (valid after Commit).
func i32s(x op.Tensor) []int32 { return slices.Clone(x.I32()) }

// mustMatrix is RandMatrix, failing the test on error.
func mustMatrix(t tb, seed uint64, n, k int, dt op.DType, scale float32) *op.Matrix {
	t.Helper()
	m, _, err := RandMatrix(seed, n, k, dt, scale)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// round32 rounds x to float32.
func round32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}
