package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stratakernels/strata/metal"
	"github.com/stratakernels/strata/metal/internal/abcase"
	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op/optest"
)

// selftest is one run: the device, the options, and the rows and notes of the report.
type selftest struct {
	dev      mtl.Device
	emulated bool
	short    bool
	abN      int
	jsonPath string
	report   io.Writer
	// validated: the run is --validate's child, under the validation layers.
	validated bool

	header   [][2]string
	sections []section
	failures []string
	variants map[string]*variantAgg
	ops      map[string]*caseAgg
	backends []*metal.Backend // every backend of the run, closed at its end
}

// newBackend is a Backend on the run's device, closed by closeAll.
func (st *selftest) newBackend(t *testing.T) *metal.Backend {
	b, err := metal.New(st.dev)
	if err != nil {
		t.Fatal(err)
	}
	st.backends = append(st.backends, b)
	return b
}

// closeAll reports the command buffers' GPU times of every backend of the run, closes them
// and reports the device's live objects after (a leak fails the row): the section "Command
// buffers and lifetimes".
func (st *selftest) closeAll() {
	var times []time.Duration
	for _, b := range st.backends {
		times = append(times, b.CommandBufferTimes()...)
		b.Close()
	}
	var rows []row
	r := row{Kernel: "command buffers", Variant: fmt.Sprintf("%d committed (budget %+v)", len(times), metal.DefaultCommandBufferBudget), Status: statusPass}
	if slices.Contains(times, 0) || len(times) == 0 {
		r.Note = "GPU time not reported by this device"
	} else {
		slices.Sort(times)
		var total time.Duration
		for _, d := range times {
			total += d
		}
		r.MS = floatp(float64(times[len(times)-1]) / 1e6)
		r.Note = fmt.Sprintf("GPU time: longest %v (ms column), median %v, total %v", times[len(times)-1], times[len(times)/2], total)
	}
	rows = append(rows, r)
	lr := row{Kernel: "objects live after Close", Status: statusPass}
	if lc, ok := st.dev.(mtl.LiveCounter); ok {
		l := lc.Live()
		lr.Variant = fmt.Sprint(l.Total())
		lr.Note = l.String()
		if l.Total() != 0 {
			lr.Status = statusFail
			st.failures = append(st.failures, fmt.Sprintf("after every backend closed, %v are still live (each keeps the Metal device alive)", l))
		}
	} else {
		lr.Status, lr.Note = statusSkip, "the device does not count its objects"
	}
	rows = append(rows, lr)
	st.sections = append(st.sections, section{"Command buffers and lifetimes", rows})
}

// caseAgg aggregates the op cases of one op (or of one alternative kernel's run).
type caseAgg struct {
	cases  int
	failed []string
	maxErr float64
}

// variantAgg aggregates the cases one kernel variant ran in.
type variantAgg struct {
	stat metal.VariantStat
	caseAgg
}

// outputs are a run's float outputs by case, name and occurrence.
type outputs map[string][]float32

func (st *selftest) run(t *testing.T) {
	start := time.Now()
	st.variants, st.ops = map[string]*variantAgg{}, map[string]*caseAgg{}
	b := st.newBackend(t)
	b.SetLog(func(msg string) { t.Log(msg) })
	st.describe(b)
	st.compile(t, b)
	st.runCases(t, b)
	st.runAlternatives(t)
	if !st.emulated && st.abN > 0 {
		st.timeAlternatives(t)
	}
	st.closeAll()
	st.header = append(st.header, [2]string{"run", fmt.Sprintf("%s in %v", st.caseSet(), time.Since(start).Round(time.Second))})
	failed := st.write(t)
	if failed > 0 {
		t.Errorf("%d rows failed (report on stdout)", failed)
	}
}

func (st *selftest) caseSet() string {
	if st.short {
		return "short op case subset"
	}
	return "all op cases"
}

// describe fills the report's header: OS, device, GPU families, compile options, tensor ops.
func (st *selftest) describe(b *metal.Backend) {
	h := [][2]string{{"OS", runtime.GOOS + "/" + runtime.GOARCH + ", " + runtime.Version()}}
	h = append(h, [2]string{"device", fmt.Sprintf("%s (backend %s, threadgroup memory %d B)", st.dev.Name(), b.Name(), st.dev.MaxThreadgroupMemoryLength())})
	if d, ok := st.dev.(mtl.Describer); ok {
		h = append(h, d.Describe()...)
	} else {
		h = append(h, [2]string{"GPU families", "none (the emulator reports no Apple GPU family)"})
	}
	h = append(h, [2]string{"compile options", fmt.Sprintf("%v; tensor-op files %v", metal.CompileOptions("norm.metal"), metal.CompileOptions("attention_tensor.metal"))})
	switch {
	case b.TensorOpsDefault():
		h = append(h, [2]string{"tensor ops", strings.Join(b.CheckTensorOps(), "; ")})
	case b.TensorOpsCompile():
		h = append(h, [2]string{"tensor ops", "compiled and run through Prefer (the defaults need MTLGPUFamilyApple10 with Metal 4)"})
	default:
		h = append(h, [2]string{"tensor ops", "not supported by this device (MTLGPUFamilyMetal4): their rows are skipped"})
	}
	timing := "per dispatch (the emulator's wall time: says nothing about GPU speed)"
	if !st.emulated {
		timing = "per pass: the command buffer's GPUEndTime - GPUStartTime (no per-stage counter sampling)"
	}
	h = append(h, [2]string{"timing", timing})
	validation := "off (--validate turns Metal's validation layers on)"
	if st.validated {
		validation = strings.Join(validationEnv, " ")
	}
	h = append(h, [2]string{"validation", validation})
	st.header = h
}

// compile compiles every kernel file and builds every pipeline the backend can build.
func (st *selftest) compile(t *testing.T, b *metal.Backend) {
	tensorOK := b.TensorOpsCompile()
	var files, pipes []row
	for _, f := range metal.Sources() {
		r := row{Kernel: f, Variant: "compile"}
		switch {
		case metal.CompileOptions(f).LanguageVersion == mtl.Language4_0 && !tensorOK:
			r.Status, r.Note = statusSkip, "needs Metal 4"
		default:
			if err := b.Compile(f); err != nil {
				r.Status = statusFail
				st.failures = append(st.failures, fmt.Sprintf("compile %s: %v", f, err))
			} else {
				r.Status = statusPass
			}
		}
		files = append(files, r)
	}
	for _, s := range metal.Pipelines() {
		r := row{Kernel: s.Kernel, Variant: s.Name(), Note: s.File}
		if s.Tensor && !tensorOK {
			r.Status, r.Note = statusSkip, s.File+": needs Metal 4"
		} else if n, err := b.BuildPipeline(s); err != nil {
			r.Status = statusFail
			st.failures = append(st.failures, fmt.Sprintf("pipeline %s: %v", s.Name(), err))
		} else {
			maxTh, width, _ := b.PipelineLimits(s)
			r.Status, r.TG, r.MaxThreads = statusPass, intp(n), intp(maxTh)
			r.Note = fmt.Sprintf("%s; at most %d threads per threadgroup, SIMD width %d", s.File, maxTh, width)
		}
		pipes = append(pipes, r)
	}
	st.sections = append(st.sections,
		section{"Kernel files (the device's compiler)", files},
		section{"Pipelines (every kernel and function-constant specialisation; static threadgroup memory; maxTotalThreadsPerThreadgroup)", pipes})
	if t.Failed() {
		t.Log("compilation failed: see the report")
	}
}

// options are the optest options of a run of the backend's cases.
func (st *selftest) options(b *metal.Backend, tol map[string]float64, filter func(string) bool, ranPrefix string,
	agg *caseAgg, outs outputs) optest.Options {
	var cur *caseAgg
	counts := func() map[string]int {
		m := map[string]int{}
		for _, v := range b.VariantStats() {
			m[v.Variant] = v.Dispatches
		}
		return m
	}
	seen := map[string]int{}
	return optest.Options{
		Short: st.short, TolScale: metal.OpTolScale, Tol: tol, NoValueChecks: true, Filter: filter,
		Before: func(t *testing.T, name string) {
			before := counts()
			c := &caseAgg{}
			cur = c
			t.Cleanup(func() {
				failed := t.Failed()
				opName := name[:strings.Index(name+"/", "/")]
				for _, a := range []*caseAgg{agg, st.opAgg(opName)} {
					if a == nil {
						continue
					}
					a.cases++
					a.maxErr = max(a.maxErr, c.maxErr)
					if failed {
						a.failed = append(a.failed, name)
					}
				}
				for _, v := range b.VariantStats() {
					if v.Dispatches == before[v.Variant] || !strings.HasPrefix(v.Variant, ranPrefix) {
						continue
					}
					va, ok := st.variants[v.Variant]
					if !ok {
						va = &variantAgg{}
						st.variants[v.Variant] = va
					}
					va.stat.Variant, va.stat.Kernel = v.Variant, v.Kernel
					va.stat.Dispatches += v.Dispatches - before[v.Variant]
					va.stat.ThreadgroupBytes = max(va.stat.ThreadgroupBytes, v.ThreadgroupBytes)
					va.cases++
					va.maxErr = max(va.maxErr, c.maxErr)
					if failed {
						va.failed = append(va.failed, name)
					}
				}
			})
		},
		Observe: func(t *testing.T, o optest.Output) {
			if cur != nil {
				cur.maxErr = max(cur.maxErr, o.RelErr)
			}
			if outs != nil {
				k := o.Case + "/" + o.Name
				outs[fmt.Sprintf("%s#%d", k, seen[k])] = o.Got
				seen[k]++
			}
		},
	}
}

// opAgg returns the aggregate of op's cases in the default run (nil outside it).
func (st *selftest) opAgg(opName string) *caseAgg {
	if st.ops == nil {
		return nil
	}
	a, ok := st.ops[opName]
	if !ok {
		a = &caseAgg{}
		st.ops[opName] = a
	}
	return a
}

// runCases runs every op's cases (and bad-argument table) with the default kernels.
func (st *selftest) runCases(t *testing.T, b *metal.Backend) {
	t.Run("default", func(t *testing.T) { optest.Run(t, b, st.options(b, nil, nil, "", nil, nil)) })
	var rows []row
	names := make([]string, 0, len(st.ops))
	for k := range st.ops {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, n := range names {
		a := st.ops[n]
		rows = append(rows, a.row(n, fmt.Sprintf("op cases (%d)", a.cases)))
		st.noteFailed(n, a.failed)
	}
	st.ops = nil // the alternatives' runs are not the default run
	st.sections = append(st.sections, section{"Op cases with the default kernels (max |got-want| / max |want| vs the float64 references)", rows})
}

// altKey names one alternative's run.
func altKey(a metal.Alternative) string { return a.Op + "=" + a.Kernel }

// runAlternatives runs each non-default alternative kernel's op cases (and, for the bitwise
// comparisons, the kernels they must equal) on backends of their own, then compares bitwise.
func (st *selftest) runAlternatives(t *testing.T) {
	b0 := st.newBackend(t)
	tensorOK := b0.TensorOpsCompile()
	need := map[string]bool{}
	for _, a := range metal.Alternatives() {
		// A default kernel runs here where a tensor-op kernel replaced it as the default.
		if _, replaced := b0.TensorDefault(a.Op); !a.Default || replaced {
			need[altKey(a)] = true
		}
		if a.Bitwise != "" && (st.emulated || !a.BitwiseEmulated) {
			need[a.Op+"="+a.Bitwise] = true
		}
	}
	var rows, bitwise []row
	outs := map[string]outputs{}
	for _, a := range metal.Alternatives() {
		key := altKey(a)
		if !need[key] {
			continue
		}
		if a.Tensor && !tensorOK {
			rows = append(rows, row{Kernel: a.Op, Variant: a.Kernel, Status: statusSkip, Note: "needs Metal 4"})
			continue
		}
		b := st.newBackend(t)
		b.SetLog(func(msg string) { t.Log(msg) })
		if err := b.Prefer(a.Op, a.Kernel); err != nil {
			t.Fatal(err)
		}
		agg := &caseAgg{}
		o := outputs{}
		t.Run(key, func(t *testing.T) {
			optest.Run(t, b, st.options(b, a.Tol, optest.OpsFilter(a.Cases), a.Ran, agg, o))
		})
		outs[key] = o
		rows = append(rows, agg.row(a.Op, a.Kernel+fmt.Sprintf(" (%s: %d cases)", strings.Join(a.Cases, ", "), agg.cases)))
		st.noteFailed(key, agg.failed)
	}
	for _, a := range metal.Alternatives() {
		if a.Bitwise == "" {
			continue
		}
		r := row{Kernel: a.Op, Variant: a.Kernel + " == " + a.Bitwise}
		got, want := outs[altKey(a)], outs[a.Op+"="+a.Bitwise]
		switch {
		case a.BitwiseEmulated && !st.emulated:
			r.Status, r.Note = statusSkip, "equal on the emulator only (tensor ops sum in the GPU's order); its tolerance is checked above"
		case got == nil || want == nil:
			r.Status, r.Note = statusSkip, "not run"
		default:
			r.Status, r.Err = statusPass, floatp(0)
			keys := make([]string, 0, len(want))
			for k := range want {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			n := 0
			for _, k := range keys {
				w := want[k]
				g, ok := got[k]
				if !ok || len(g) != len(w) {
					r.Status = statusFail
					st.failures = append(st.failures, fmt.Sprintf("%s: output %s missing or of another length", r.Variant, k))
					continue
				}
				if i, d := abcase.FirstDiff(g, w); i >= 0 {
					r.Status = statusFail
					*r.Err = max(*r.Err, d/maxAbs(w))
					st.failures = append(st.failures, fmt.Sprintf("%s: %s differs first at element %d (%g vs %g)", r.Variant, k, i, g[i], w[i]))
				}
				n++
			}
			r.Note = fmt.Sprintf("%d outputs compared", n)
		}
		bitwise = append(bitwise, r)
	}
	st.sections = append(st.sections, section{"Op cases with each alternative kernel (Prefer; tolerances of metal.Alternatives)", rows})
	st.sections = append(st.sections, section{"Kernel variants (threadgroup memory of their largest dispatch; threadgroups per core by threadgroup memory, 32 KiB a core)", st.variantRows()})
	st.sections = append(st.sections, section{"Alternatives that must give another kernel's bits", bitwise})
}

// variantRows lists every variant that ran, with the cases it ran in.
func (st *selftest) variantRows() []row {
	names := make([]string, 0, len(st.variants))
	for k := range st.variants {
		names = append(names, k)
	}
	sort.Strings(names)
	var rows []row
	for _, n := range names {
		v := st.variants[n]
		r := v.row(v.stat.Kernel, n)
		r.TG = intp(v.stat.ThreadgroupBytes)
		r.Note = fmt.Sprintf("%d dispatches in %d cases", v.stat.Dispatches, v.cases)
		rows = append(rows, r)
	}
	return rows
}

// timeAlternatives times every op's kernels against the backend's default in paired runs.
func (st *selftest) timeAlternatives(t *testing.T) {
	var rows []row
	for _, opName := range abcase.Ops() {
		T, pos0 := 512, 0
		if opName == "attention" {
			pos0 = 512
		}
		call, err := abcase.NewCall(opName, T, pos0, 1)
		if err != nil {
			t.Fatal(err)
		}
		def := st.newBackend(t)
		for _, a := range metal.Alternatives() {
			if a.Op != abcase.PreferOp(opName) {
				continue
			}
			r := row{Kernel: opName, Variant: a.Kernel}
			b := st.newBackend(t)
			if err := b.Prefer(a.Op, a.Kernel); err != nil {
				r.Status, r.Note = statusSkip, err.Error()
				rows = append(rows, r)
				continue
			}
			sa, sb, err := abcase.Paired(def, b, []abcase.Call{call}, st.abN)
			if err != nil {
				r.Status = statusFail
				st.failures = append(st.failures, fmt.Sprintf("timing %s=%s: %v", opName, a.Kernel, err))
				rows = append(rows, r)
				continue
			}
			ma, _ := abcase.Stats(sa.Device)
			mb, minb := abcase.Stats(sb.Device)
			r.Status, r.MS = statusPass, floatp(ms(mb))
			r.Note = fmt.Sprintf("min %.3f ms; default (%s) median %.3f ms; ratio %.3f; T %d%s, %d pairs",
				ms(minb), strings.Join(def.Variants(), " "), ms(ma), float64(mb)/float64(ma), T, posNote(pos0), st.abN)
			def.ResetVariants()
			rows = append(rows, r)
		}
	}
	st.sections = append(st.sections, section{"Paired A/B timings (GPU time per pass: median ms of the kernel; alternating pairs against the default)", rows})
}

func posNote(pos0 int) string {
	if pos0 == 0 {
		return ""
	}
	return fmt.Sprintf(" after %d cached", pos0)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// noteFailed lists failed cases for the report's failure section.
func (st *selftest) noteFailed(what string, cases []string) {
	for _, c := range cases {
		st.failures = append(st.failures, what+": case "+c+" failed (details on stderr)")
	}
}

func maxAbs(x []float32) float64 {
	m := 0.0
	for _, v := range x {
		m = max(m, math.Abs(float64(v)))
	}
	if m == 0 {
		return 1
	}
	return m
}
