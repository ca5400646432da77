package blas

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// naive is C = alpha*op(A)*op(B) + beta*C in float64, element by element.
func naive(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			out[i*n+j] = float64(alpha)*s + float64(beta)*float64(c[i*ldc+j])
		}
	}
	return out
}

func randSlice(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func TestImplNamed(t *testing.T) {
	s := Impl()
	if s == "" {
		t.Fatal("Impl() is empty")
	}
	t.Logf("blas: %s", s)
	if runtime.GOOS == "linux" && !Native() {
		t.Logf("native OpenBLAS not in use: %s", s)
	}
}

func TestSgemm(t *testing.T) { forEachBackend(t, testSgemm) }

func testSgemm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		tA, tB      bool
		m, n, k     int
		pad         int // extra columns in each leading dimension
		alpha, beta float32
	}{
		{false, true, 1, 1, 1, 0, 1, 0},
		{false, true, 3, 17, 64, 0, 1, 0},
		{false, true, 65, 63, 300, 0, 1, 0},
		{false, true, 300, 130, 256, 3, 1, 0},
		{false, false, 17, 33, 65, 1, 0.5, 0},
		{true, false, 31, 9, 40, 2, 1, 1},
		{true, true, 12, 70, 23, 0, -2, 0.25},
		{false, true, 64, 64, 0, 0, 1, 0.5},
	}
	for _, tc := range cases {
		ar, ac := tc.m, tc.k
		if tc.tA {
			ar, ac = tc.k, tc.m
		}
		br, bc := tc.k, tc.n
		if tc.tB {
			br, bc = tc.n, tc.k
		}
		lda, ldb, ldc := max(1, ac)+tc.pad, max(1, bc)+tc.pad, max(1, tc.n)+tc.pad
		a := randSlice(r, ar*lda)
		b := randSlice(r, br*ldb)
		c := randSlice(r, tc.m*ldc)
		want := naive(tc.tA, tc.tB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc)
		if err := Sgemm(tc.tA, tc.tB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc); err != nil {
			t.Fatal(err)
		}
		var maxErr float64
		for i := 0; i < tc.m; i++ {
			for j := 0; j < tc.n; j++ {
				d := math.Abs(float64(c[i*ldc+j]) - want[i*tc.n+j])
				// float32 accumulation over k terms of unit-variance products
				tol := 1e-5 * (1 + math.Sqrt(float64(tc.k))) * 4
				if d > tol || math.IsNaN(d) {
					t.Fatalf("%+v: C[%d,%d] = %g, want %g", tc, i, j, c[i*ldc+j], want[i*tc.n+j])
				}
				maxErr = max(maxErr, d)
			}
		}
		t.Logf("%+v: max |diff| %.3g", tc, maxErr)
	}
}

func TestSgemmBetaZeroIgnoresC(t *testing.T) { forEachBackend(t, testSgemmBetaZeroIgnoresC) }

func testSgemmBetaZeroIgnoresC(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m, n, k := 5, 7, 9
	a, b := randSlice(r, m*k), randSlice(r, n*k)
	c := make([]float32, m*n)
	for i := range c {
		c[i] = float32(math.NaN())
	}
	if err := Sgemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n); err != nil {
		t.Fatal(err)
	}
	for i, v := range c {
		if math.IsNaN(float64(v)) {
			t.Fatalf("C[%d] is NaN with beta = 0", i)
		}
	}
}

func TestSgemmErrors(t *testing.T) {
	a := make([]float32, 12)
	cases := []struct {
		name string
		call func() error
	}{
		{"negative m", func() error { return Sgemm(false, true, -1, 2, 2, 1, a, 2, a, 2, 0, a, 2) }},
		{"lda too small", func() error { return Sgemm(false, true, 2, 2, 3, 1, a, 2, a, 3, 0, a, 2) }},
		{"A short", func() error { return Sgemm(false, true, 5, 2, 3, 1, a, 3, a, 3, 0, a, 2) }},
		{"B short", func() error { return Sgemm(false, false, 2, 5, 3, 1, a, 3, a, 5, 0, a, 5) }},
		{"C short", func() error { return Sgemm(false, true, 2, 2, 2, 1, a, 2, a, 2, 0, a[:3], 2) }},
		{"huge k", func() error { return Sgemm(false, true, 1, 1, math.MaxInt32+1, 1, a, 2, a, 2, 0, a, 2) }},
	}
	for _, tc := range cases {
		if err := tc.call(); !errors.Is(err, ErrArg) {
			t.Errorf("%s: got %v, want ErrArg", tc.name, err)
		}
	}
}

// TestSgemmDeterministic checks bitwise equality across repeated calls, across GOMAXPROCS and,
// for OpenBLAS, across its thread count (restored to the pinned value afterwards).
func TestSgemmDeterministic(t *testing.T) { forEachBackend(t, testSgemmDeterministic) }

func testSgemmDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	m, n, k := 257, 384, 1000
	a, b := randSlice(r, m*k), randSlice(r, n*k)
	run := func() []float32 {
		c := make([]float32, m*n)
		if err := Sgemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n); err != nil {
			t.Fatal(err)
		}
		return c
	}
	ref := run()
	same := func(what string, got []float32) {
		t.Helper()
		for i := range ref {
			if math.Float32bits(ref[i]) != math.Float32bits(got[i]) {
				t.Fatalf("%s: element %d differs: %g vs %g", what, i, got[i], ref[i])
			}
		}
	}
	same("second run", run())
	old := runtime.GOMAXPROCS(1)
	same("GOMAXPROCS=1", run())
	runtime.GOMAXPROCS(2)
	same("GOMAXPROCS=2", run())
	runtime.GOMAXPROCS(old)

	pinned := nativeThreads()
	if pinned == 0 {
		t.Logf("%s: no native thread count to vary", Impl())
		return
	}
	if want := threadsWanted(); pinned != want {
		t.Fatalf("OpenBLAS runs %d threads, pinned value is %d", pinned, want)
	}
	// OpenBLAS's results do depend on its thread count (its single-thread path blocks the
	// product differently), which is why the count is pinned: log which counts agree with the
	// pinned one, then check that returning to the pinned count returns the same bits.
	for _, th := range []int{1, 2, 3, 4} {
		setNativeThreads(th)
		got := run()
		diff := 0
		for i := range ref {
			if math.Float32bits(ref[i]) != math.Float32bits(got[i]) {
				diff++
			}
		}
		t.Logf("openblas threads=%d: %d of %d elements differ from threads=%d", th, diff, len(ref), pinned)
	}
	setNativeThreads(pinned)
	if nativeThreads() != pinned {
		t.Fatalf("thread count not restored: %d", nativeThreads())
	}
	same("back to the pinned thread count", run())
}

// TestSgemmConcurrent runs independent products from several goroutines at once and requires
// each to equal the same product run alone, bit for bit.
func TestSgemmConcurrent(t *testing.T) { forEachBackend(t, testSgemmConcurrent) }

func testSgemmConcurrent(t *testing.T) {
	t.Logf("%s, concurrent=%v", Impl(), Concurrent())
	r := rand.New(rand.NewPCG(9, 10))
	const m, n, k, calls = 37, 96, 300, 8
	a := randSlice(r, m*k)
	bs := make([][]float32, calls)
	want := make([][]float32, calls)
	for i := range bs {
		bs[i] = randSlice(r, n*k)
		want[i] = make([]float32, m*n)
		if err := Sgemm(false, true, m, n, k, 1, a, k, bs[i], k, 0, want[i], n); err != nil {
			t.Fatal(err)
		}
	}
	got := make([][]float32, calls)
	errs := make(chan error, calls)
	for i := range got {
		got[i] = make([]float32, m*n)
		go func(i int) {
			errs <- Sgemm(false, true, m, n, k, 1, a, k, bs[i], k, 0, got[i], n)
		}(i)
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range got {
		for j := range got[i] {
			if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
				t.Fatalf("call %d element %d: %g concurrently, %g alone", i, j, got[i][j], want[i][j])
			}
		}
	}
}

func TestPeak(t *testing.T) { forEachBackend(t, testPeak) }

func testPeak(t *testing.T) {
	if _, _, err := Peak(0, 1); !errors.Is(err, ErrArg) {
		t.Fatalf("Peak(0, 1): %v, want ErrArg", err)
	}
	before := nativeThreads()
	g, how, err := Peak(64, 2)
	if err != nil || !(g > 0) || how == "" {
		t.Fatalf("Peak(64, 2) = %g, %q, %v", g, how, err)
	}
	if nativeThreads() != before {
		t.Fatalf("thread count %d after Peak, was %d", nativeThreads(), before)
	}
	t.Logf("%.3g GFLOP/s: %s", g, how)
}

// STRATA_BLAS_THREADS: a positive count is used, anything else is 1 and said.
func TestParseThreads(t *testing.T) {
	for _, tc := range []struct {
		v   string
		n   int
		bad bool
	}{
		{"", 1, false}, {"1", 1, false}, {"4", 4, false}, {" 2 ", 1, true}, {"1024", 1024, false},
		{"0", 1, true}, {"-3", 1, true}, {"abc", 1, true}, {"2.5", 1, true}, {"1025", 1, true},
	} {
		n, bad := parseThreads(tc.v)
		if n != tc.n || (bad != "") != tc.bad {
			t.Errorf("parseThreads(%q) = %d, %q; want %d, bad=%t", tc.v, n, bad, tc.n, tc.bad)
		}
		if bad != "" && !strings.Contains(bad, "STRATA_BLAS_THREADS=") {
			t.Errorf("parseThreads(%q): note %q does not name the variable", tc.v, bad)
		}
	}
}
