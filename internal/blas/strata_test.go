package blas

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stratakernels/strata/internal/cputime"
	"github.com/stratakernels/strata/internal/panel"
)

var testNative struct {
	once sync.Once
	b    backend
	err  error
}

// testBackends lists every implementation this machine runs, the one in use first: the native
// library when it loads (also when STRATA_BLAS chose strata's GEMM), and strata's GEMM with
// each panel set of this CPU.
func testBackends() []backend {
	cur := choose()
	out := []backend{cur}
	if !isNative(cur) {
		testNative.once.Do(func() { testNative.b, testNative.err = loadNative(threadsWanted()) })
		if testNative.err == nil {
			out = append(out, testNative.b)
		}
	}
	for _, s := range panel.Sets() {
		if b := (strataBackend{s}); b != cur {
			out = append(out, b)
		}
	}
	return out
}

// useBackend makes b the implementation behind Sgemm and returns a function that restores the
// previous one.
func useBackend(b backend) (restore func()) {
	prev := choose()
	selected = b
	return func() { selected = prev }
}

// forEachBackend runs f once per implementation of testBackends, as subtests named after them.
func forEachBackend(t *testing.T, f func(t *testing.T)) {
	for _, b := range testBackends() {
		t.Run(b.name(), func(t *testing.T) {
			defer useBackend(b)()
			f(t)
		})
	}
}

// strataSets lists strata's GEMM with each panel set of this CPU.
func strataSets() []strataBackend {
	var out []strataBackend
	for _, s := range panel.Sets() {
		out = append(out, strataBackend{s})
	}
	return out
}

// fakeNative stands for a native library in TestPick and the speed tests; serial reports a
// library that spreads each call over its own threads.
type fakeNative struct{ serial bool }

func (f fakeNative) name() string {
	if f.serial {
		return "fake native 1.0 (4 threads/call)"
	}
	return "fake native 1.0"
}
func (f fakeNative) concurrent() bool { return !f.serial }
func (fakeNative) sgemm(bool, bool, int, int, int, float32, []float32, int, []float32, int, float32, []float32, int) {
}

// TestPick: the choice of implementation and what Impl says about it, for every STRATA_BLAS
// case: by speed when the native library loads and runs calls concurrently (kept untimed when it
// does not), strata's GEMM with the best panel set and the load error when it does not load,
// strata's GEMM without trying when forced, the native library untimed with "native", an
// unknown value named.
func TestPick(t *testing.T) {
	loads := func() (backend, error) { return fakeNative{}, nil }
	serial := func() (backend, error) { return fakeNative{serial: true}, nil }
	fails := func() (backend, error) { return nil, errors.New("libopenblas.so.0: cannot open shared object file") }
	never := func() (backend, error) { t.Fatal("native library loaded although STRATA_BLAS=strata"); return nil, nil }
	ownWins := func(native, own backend) (backend, string) { return own, "picked by speed: 1.10x fake" }
	nativeWins := func(native, own backend) (backend, string) { return native, "picked by speed: 1.10x strata" }
	untimed := func(native, own backend) (backend, string) {
		t.Fatal("timed although it should not be")
		return nil, ""
	}
	strata := "strata " + panel.Best().String()
	type pickCase struct {
		env   string
		load  func() (backend, error)
		speed func(native, own backend) (backend, string)
		want  string
	}
	timed := []pickCase{
		{"", loads, nativeWins, "fake native 1.0 (picked by speed: 1.10x strata)"},
		{"", loads, ownWins, strata + " (picked by speed: 1.10x fake)"},
		{"gonum", loads, nativeWins, `fake native 1.0 (picked by speed: 1.10x strata; STRATA_BLAS="gonum" ignored: its values are strata and native)`},
	}
	if panel.Best() == panel.Generic {
		// Without vector kernels strata's GEMM is not timed against the native library.
		timed = []pickCase{{"", loads, untimed, "fake native 1.0 (not timed against strata's GEMM: it has no vector kernels on this CPU and build)"}}
	}
	for _, tc := range append(timed, []pickCase{
		{"", serial, untimed, "fake native 1.0 (4 threads/call; not timed against strata's GEMM: the library spreads each call over its own threads)"},
		{"", fails, untimed, strata + " (no native BLAS: libopenblas.so.0: cannot open shared object file)"},
		{"strata", never, untimed, strata + " (forced by STRATA_BLAS=strata)"},
		{"native", loads, untimed, "fake native 1.0 (forced by STRATA_BLAS=native)"},
		{"native", fails, untimed, strata + " (STRATA_BLAS=native, but no native BLAS: libopenblas.so.0: cannot open shared object file)"},
		{"gonum", fails, untimed, strata + ` (no native BLAS: libopenblas.so.0: cannot open shared object file; STRATA_BLAS="gonum" ignored: its values are strata and native)`},
	}...) {
		b, note, bad := pick(tc.env, tc.load, tc.speed)
		if got := implName(b, note, bad); got != tc.want {
			t.Errorf("STRATA_BLAS=%q: Impl %q, want %q", tc.env, got, tc.want)
		}
		if _, isStrata := b.(strataBackend); isNative(b) == isStrata {
			t.Errorf("STRATA_BLAS=%q: isNative(%s) = %v", tc.env, b.name(), isNative(b))
		}
	}
}

// gemmCase is one product: sizes, transposes, padding of each leading dimension, alpha, beta.
type gemmCase struct {
	tA, tB      bool
	m, n, k     int
	padA, padB  int
	padC        int
	alpha, beta float32
}

func (c gemmCase) String() string {
	return fmt.Sprintf("tA%v_tB%v_%dx%dx%d_pad%d,%d,%d_a%g_b%g", c.tA, c.tB, c.m, c.n, c.k,
		c.padA, c.padB, c.padC, c.alpha, c.beta)
}

// operands makes A, B and C of c with their leading dimensions, random normal values, and the
// padding filled with NaN (a read of it would show in C).
func (c gemmCase) operands(r *rand.Rand) (a []float32, lda int, b []float32, ldb int, cm []float32, ldc int) {
	ar, ac := c.m, c.k
	if c.tA {
		ar, ac = c.k, c.m
	}
	br, bc := c.k, c.n
	if c.tB {
		br, bc = c.n, c.k
	}
	lda, ldb, ldc = max(1, ac)+c.padA, max(1, bc)+c.padB, max(1, c.n)+c.padC
	mat := func(rows, cols, ld int) []float32 {
		x := make([]float32, rows*ld)
		for i := range x {
			if i%ld < cols {
				x[i] = float32(r.NormFloat64())
			} else {
				x[i] = float32(math.NaN())
			}
		}
		return x
	}
	return mat(ar, ac, lda), lda, mat(br, bc, ldb), ldb, mat(c.m, c.n, ldc), ldc
}

// gemmCases crosses every block edge of the strata GEMM (gemmKC and gemmNC, the six-row tiles,
// the 16/8-column vector blocks and their tails), every transpose, padded leading dimensions,
// k = 0 and 1, and the alpha/beta cases BLAS distinguishes (alpha 0, beta 0 and 1).
func gemmCases() []gemmCase {
	var cs []gemmCase
	for _, tr := range [][2]bool{{false, true}, {false, false}, {true, false}, {true, true}} {
		for _, s := range [][3]int{
			{1, 1, 1}, {1, 17, 64}, {5, 7, 3}, {6, 16, 8}, {7, 9, 13}, {13, 33, 1}, {17, 65, 257},
			{31, 257, 40}, {64, 64, 0}, {300, 130, 256}, {97, 513, 129}, {12, 70, 600}, {1, 300, 513},
		} {
			cs = append(cs, gemmCase{tr[0], tr[1], s[0], s[1], s[2], 0, 0, 0, 1, 0})
		}
		cs = append(cs,
			gemmCase{tr[0], tr[1], 19, 37, 45, 3, 5, 2, 1, 0},
			gemmCase{tr[0], tr[1], 19, 37, 45, 1, 0, 7, -2, 0.25},
			gemmCase{tr[0], tr[1], 23, 300, 270, 2, 9, 1, 0.5, 1},
			gemmCase{tr[0], tr[1], 8, 20, 30, 0, 0, 3, 0, 0.5},
			gemmCase{tr[0], tr[1], 8, 20, 0, 0, 0, 3, 1, -1.5},
			gemmCase{tr[0], tr[1], 40, 24, 280, 4, 4, 4, 1.25, -1},
		)
	}
	return cs
}

// TestStrataSgemm: strata's GEMM with every panel set against a float64 product on
// gemmCases, within the forward error bound of a k-term float32 sum, with the elements of C
// past n untouched and no NaN from the padding of A, B or C (beta = 0 does not read C; alpha
// = 0 reads neither A nor B).
func TestStrataSgemm(t *testing.T) {
	for _, be := range strataSets() {
		t.Run(be.name(), func(t *testing.T) {
			defer useBackend(be)()
			testStrataSgemm(t)
		})
	}
}

func testStrataSgemm(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, tc := range gemmCases() {
		a, lda, b, ldb, c, ldc := tc.operands(r)
		if tc.beta == 0 {
			for i := range c {
				c[i] = float32(math.NaN())
			}
		}
		if tc.alpha == 0 {
			for i := range a {
				a[i] = float32(math.NaN())
			}
		}
		c0 := slices.Clone(c)
		want, bound := reference(tc, a, lda, b, ldb, c0, ldc)
		if err := Sgemm(tc.tA, tc.tB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < tc.m; i++ {
			for j := 0; j < ldc; j++ {
				got := c[i*ldc+j]
				if j >= tc.n {
					if math.Float32bits(got) != math.Float32bits(c0[i*ldc+j]) {
						t.Fatalf("%v: C[%d, %d] past n changed", tc, i, j)
					}
					continue
				}
				w, e := want[i*tc.n+j], bound[i*tc.n+j]
				if d := math.Abs(float64(got) - w); !(d <= e) {
					t.Fatalf("%v: C[%d, %d] = %g, want %g (|diff| %.3g > bound %.3g)", tc, i, j, got, w, d, e)
				}
			}
		}
	}
}

// reference is C = alpha op(A) op(B) + beta C in float64 with, per element, the forward error
// bound of the float32 computation: (kb + nb + 3) u (|alpha| sum_p |a_p b_p| + |beta c|),
// u = 2^-24, for sums in nb blocks of at most kb = gemmKC terms (kb roundings within a block,
// nb adding the blocks up, one each for alpha, the product and beta*c). A single chain over
// all k terms has the bound with kb = k, nb = 1, which this one also holds.
func reference(tc gemmCase, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) (want, bound []float64) {
	want = make([]float64, tc.m*tc.n)
	bound = make([]float64, tc.m*tc.n)
	const u = 1.0 / (1 << 24)
	for i := 0; i < tc.m; i++ {
		for j := 0; j < tc.n; j++ {
			var s, abs float64
			if tc.alpha != 0 {
				for p := 0; p < tc.k; p++ {
					var av, bv float32
					if tc.tA {
						av = a[p*lda+i]
					} else {
						av = a[i*lda+p]
					}
					if tc.tB {
						bv = b[j*ldb+p]
					} else {
						bv = b[p*ldb+j]
					}
					s += float64(av) * float64(bv)
					abs += math.Abs(float64(av) * float64(bv))
				}
			}
			w := float64(tc.alpha) * s
			e := math.Abs(float64(tc.alpha)) * abs
			if tc.beta != 0 {
				w += float64(tc.beta) * float64(c[i*ldc+j])
				e += math.Abs(float64(tc.beta) * float64(c[i*ldc+j]))
			}
			want[i*tc.n+j] = w
			kb, nb := min(tc.k, gemmKC), (tc.k+gemmKC-1)/gemmKC
			bound[i*tc.n+j] = float64(kb+nb+3) * u * e
		}
	}
	return want, bound
}

// TestStrataLongK: on a long product (5 x 600 x 4096, unit-normal values, the shape of
// kernels' TestMatMulPanels) the partial sums per gemmKC block keep the largest error under
// 1e-6 of max |C| (0.37e-6 measured, OpenBLAS 0.32e-6); one chain over all 4096 terms gives
// 2.3e-6.
func TestStrataLongK(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 9))
	tc := gemmCase{tA: false, tB: true, m: 5, n: 600, k: 4096, alpha: 1}
	x, lda, w, ldb, c, ldc := tc.operands(r)
	want, _ := reference(tc, x, lda, w, ldb, c, ldc)
	for _, be := range strataSets() {
		t.Run(be.name(), func(t *testing.T) {
			defer useBackend(be)()
			if err := Sgemm(false, true, tc.m, tc.n, tc.k, 1, x, lda, w, ldb, 0, c, ldc); err != nil {
				t.Fatal(err)
			}
			var md, mw float64
			for i := range want {
				md = max(md, math.Abs(float64(c[i])-want[i]))
				mw = max(mw, math.Abs(want[i]))
			}
			t.Logf("max |diff| / max |C| = %.3g", md/mw)
			if md/mw > 1e-6 {
				t.Fatalf("max |diff| / max |C| = %.3g > 1e-6", md/mw)
			}
		})
	}
}

// TestStrataBitwise: strata's GEMM gives an element of C the same bits whatever the product
// around it: run to run, in one call or in column blocks run on 1, 2 or 5 goroutines
// (kernels' split), row by row (m = 1). The AVX-512F set gives the bits of the
// AVX2 set.
func TestStrataBitwise(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const m, n, k = 50, 700, 530
	for _, tr := range [][2]bool{{false, true}, {false, false}, {true, false}, {true, true}} {
		tc := gemmCase{tA: tr[0], tB: tr[1], m: m, n: n, k: k, padA: 1, padB: 2, padC: 3, alpha: 1, beta: 0}
		a, lda, b, ldb, c0, ldc := tc.operands(r)
		// call computes rows x cols of C from row r0 and column c0 on, in one Sgemm.
		call := func(c []float32, rows, r0, cols, c0 int) {
			ar, br := r0*lda, c0*ldb
			if tc.tA {
				ar = r0
			}
			if !tc.tB {
				br = c0
			}
			if err := Sgemm(tc.tA, tc.tB, rows, cols, k, 1, a[ar:], lda, b[br:], ldb, 0, c[r0*ldc+c0:], ldc); err != nil {
				t.Fatal(err)
			}
		}
		var perSet [][]float32
		for _, be := range strataSets() {
			restore := useBackend(be)
			var ref []float32
			same := func(what string, got []float32) {
				t.Helper()
				for i := range ref {
					if math.Float32bits(ref[i]) != math.Float32bits(got[i]) && !math.IsNaN(float64(ref[i])) {
						t.Fatalf("%s %v: %s: C[%d] = %g, one call gives %g", be.name(), tc, what, i, got[i], ref[i])
					}
				}
			}
			ref = slices.Clone(c0)
			call(ref, m, 0, n, 0)
			again := slices.Clone(c0)
			call(again, m, 0, n, 0)
			same("second run", again)
			for _, workers := range []int{1, 2, 5} {
				got := slices.Clone(c0)
				const nb = 96 // column blocks, as the CPU backend's MatMul splits W
				next := make(chan int, (n+nb-1)/nb)
				for c := 0; c < n; c += nb {
					next <- c
				}
				close(next)
				var wg sync.WaitGroup
				for range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for c := range next {
							call(got, m, 0, min(nb, n-c), c)
						}
					}()
				}
				wg.Wait()
				same(fmt.Sprintf("column blocks on %d goroutines", workers), got)
			}
			rows := slices.Clone(c0)
			for i := 0; i < m; i++ {
				call(rows, 1, i, n, 0)
			}
			same("row by row", rows)
			restore()
			perSet = append(perSet, ref)
		}
		if panel.Best() == panel.Asm512 {
			for i := range perSet[0] {
				if math.Float32bits(perSet[0][i]) != math.Float32bits(perSet[1][i]) && !math.IsNaN(float64(perSet[0][i])) {
					t.Fatalf("%v: C[%d] = %g with avx512, %g with avx2", tc, i, perSet[0][i], perSet[1][i])
				}
			}
		}
	}
}

// mainJobShapes are the products of the README's main job (`go run ./examples/prefill`: the
// qwen4exp-small preset, D 512, 300 tokens), as the CPU backend's MatMul hands them to Sgemm (y[m, n] =
// x[m, k] W[n, k]^T, W split into column blocks), with the number of calls of one prefill:
// the dense layers at m = 300, the experts' gate_up and down at their mean of 93.75 rows
// (300 tokens x top-10 / 32 experts).
var mainJobShapes = []struct{ m, n, k, calls int }{
	{300, 1024, 512, 18}, {300, 256, 512, 18}, {300, 768, 512, 6}, {300, 512, 768, 6},
	{300, 160, 3072, 6}, {300, 64, 2048, 16}, {300, 2048, 64, 16}, {300, 512, 128, 9},
	{300, 640, 512, 2}, {300, 2048, 128, 1}, {300, 32, 3072, 2}, {300, 32, 512, 8},
	{94, 256, 512, 256}, {94, 512, 128, 256},
}

// benchName is a backend's name in benchmark names: "openblas", "accelerate", "strata-avx512",
// "strata-avx2-fma", "strata-neon" or "strata-generic".
func benchName(b backend) string {
	if s, ok := b.(strataBackend); ok {
		return "strata-" + strings.Fields(s.set.String())[0]
	}
	return strings.Fields(b.name())[0]
}

// BenchmarkSgemmMainJob: every implementation on the products of mainJobShapes, one call at a
// time on one core: the whole mix of one prefill ("mix": the main job's GEMM time on one core,
// ms per prefill) and each shape alone (GFLOP/s). Beside wall time it reports the CPU time of
// the benchmark's thread ("cpu-ms/prefill", "cpu-GFLOP/s"; Linux), which other processes on
// a shared machine do not inflate. The portable set is about 15 times slower than the
// others: -bench 'MainJob/(openblas|strata-avx)' leaves it out.
func BenchmarkSgemmMainJob(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	type op struct{ x, w, y []float32 }
	ops := make([]op, len(mainJobShapes))
	for i, s := range mainJobShapes {
		ops[i] = op{randSlice(r, s.m*s.k), randSlice(r, s.n*s.k), make([]float32, s.m*s.n)}
	}
	run := func(b *testing.B, i int) {
		s, o := mainJobShapes[i], ops[i]
		if err := Sgemm(false, true, s.m, s.n, s.k, 1, o.x, s.k, o.w, s.k, 0, o.y, s.n); err != nil {
			b.Fatal(err)
		}
	}
	// measure runs f in a b.Loop on a locked thread and reports flops per iteration as GFLOP/s
	// of wall and of thread CPU time, and, with unit, the time per iteration in ms.
	measure := func(b *testing.B, flops float64, unit string, f func()) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c0, ok := cputime.Thread()
		for b.Loop() {
			f()
		}
		c1, _ := cputime.Thread()
		n := float64(b.N)
		b.ReportMetric(flops*n/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		if unit != "" {
			b.ReportMetric(b.Elapsed().Seconds()*1e3/n, "ms/"+unit)
		}
		if ok {
			cpu := (c1 - c0).Seconds()
			b.ReportMetric(flops*n/cpu/1e9, "cpu-GFLOP/s")
			if unit != "" {
				b.ReportMetric(cpu*1e3/n, "cpu-ms/"+unit)
			}
		}
	}
	for _, be := range testBackends() {
		b.Run(benchName(be), func(b *testing.B) {
			defer useBackend(be)()
			var flops float64
			for _, s := range mainJobShapes {
				flops += 2 * float64(s.m*s.n*s.k*s.calls)
			}
			b.Run("mix", func(b *testing.B) {
				measure(b, flops, "prefill", func() {
					for i, s := range mainJobShapes {
						for range s.calls {
							run(b, i)
						}
					}
				})
			})
			for i, s := range mainJobShapes {
				b.Run(fmt.Sprintf("%dx%dx%d", s.m, s.n, s.k), func(b *testing.B) {
					measure(b, 2*float64(s.m*s.n*s.k), "", func() { run(b, i) })
				})
			}
		})
	}
}

// BenchmarkPeak: Peak(2048, 3) of every implementation but the portable set, in one run: the
// peak P of package strata's benchmarks, and strata's GEMM on all cores as a fraction of it.
func BenchmarkPeak(b *testing.B) {
	for _, be := range testBackends() {
		if s, ok := be.(strataBackend); ok && s.set == panel.Generic {
			continue
		}
		b.Run(benchName(be), func(b *testing.B) {
			defer useBackend(be)()
			var best float64
			for b.Loop() {
				g, how, err := Peak(2048, 3)
				if err != nil {
					b.Fatal(err)
				}
				best = max(best, g)
				b.Log(how)
			}
			b.ReportMetric(best, "GFLOP/s")
		})
	}
}
