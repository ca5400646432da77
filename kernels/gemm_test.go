package kernels

import (
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/x448/float16"

	"github.com/stratakernels/strata/internal/blas"
	"github.com/stratakernels/strata/internal/qdot"
	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// denseMatrix builds a weight [n, k] of dt from deterministic values (optest.RandMatrix) and
// returns it with the widened float32 values a reference must use.
func denseMatrix(t testing.TB, seed uint64, n, k int, dt op.DType, scale float32) (*op.Matrix, []float32) {
	t.Helper()
	m, wide, err := optest.RandMatrix(seed, n, k, dt, scale)
	if err != nil {
		t.Fatal(err)
	}
	return m, wide
}

// denseLinear64 is y = x W^T in float64, x [T, K], W [N, K].
func denseLinear64(x []float64, T int, w []float32, N, K int) []float64 {
	y := make([]float64, T*N)
	for t := 0; t < T; t++ {
		for n := 0; n < N; n++ {
			var s float64
			for k := 0; k < K; k++ {
				s += x[t*K+k] * float64(w[n*K+k])
			}
			y[t*N+n] = s
		}
	}
	return y
}

func denseTo64(x []float32) []float64 { return optest.To64(x) }

// denseMaxRel is max |got - want| / max |want| (NaN in got counts as infinite error).
func denseMaxRel(got []float32, want []float64) float64 {
	var md, mw float64
	for i, w := range want {
		d := math.Abs(float64(got[i]) - w)
		if math.IsNaN(d) {
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

func denseCheck(t *testing.T, name string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	if r := denseMaxRel(got, want); r > tol {
		t.Errorf("%s: max |diff| / max |want| = %.3g > %.1g", name, r, tol)
	}
}

// denseSameAcrossProcs runs fn twice at GOMAXPROCS 1, 2 and 4 and requires bitwise equal results.
func denseSameAcrossProcs(t *testing.T, name string, fn func() []float32) {
	t.Helper()
	old := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(old)
	var ref []float32
	for _, p := range []int{1, 2, 4, 2} {
		runtime.GOMAXPROCS(p)
		got := fn()
		if ref == nil {
			ref = got
			continue
		}
		for i := range ref {
			if math.Float32bits(ref[i]) != math.Float32bits(got[i]) {
				t.Fatalf("%s: GOMAXPROCS=%d changes element %d: %g vs %g", name, p, i, got[i], ref[i])
			}
		}
	}
}

func TestMatMulPanels(t *testing.T) {
	// K = 4096 makes a panel of 256 rows, so N = 600 spans three panels (the last partial).
	const T, N, K = 5, 600, 4096
	for _, dt := range []op.DType{op.BF16, op.F16} {
		w, wide := denseMatrix(t, 7, N, K, dt, 0.05)
		x := optest.Floats(8, T*K, 1)
		y := make([]float32, T*N)
		if err := matMulChecked(y, x, T, w); err != nil {
			t.Fatal(err)
		}
		denseCheck(t, "panels "+dt.String(), y, denseLinear64(denseTo64(x), T, wide, N, K), 2e-6)
		wf, err := widenF32(w)
		if err != nil {
			t.Fatal(err)
		}
		y2 := make([]float32, T*N)
		if err := matMulChecked(y2, x, T, wf); err != nil {
			t.Fatal(err)
		}
		denseCheck(t, "widened "+dt.String(), y2, denseLinear64(denseTo64(x), T, wide, N, K), 2e-6)
	}
}

func TestMatMulDeterministic(t *testing.T) {
	w, _ := denseMatrix(t, 9, 300, 520, op.BF16, 0.1)
	x := optest.Floats(10, 65*520, 1)
	denseSameAcrossProcs(t, "MatMul", func() []float32 {
		y := make([]float32, 65*300)
		if err := matMulChecked(y, x, 65, w); err != nil {
			t.Fatal(err)
		}
		return y
	})
}

func TestWidenExact(t *testing.T) {
	for b := 0; b < 1<<16; b++ {
		h := float16.Frombits(uint16(b)).Float32()
		got := f16ToF32(uint16(b))
		if math.Float32bits(got) != math.Float32bits(h) && !(h != h && got != got) {
			t.Fatalf("F16ToF32(%#04x) = %g, want %g", b, got, h)
		}
		dst := []float32{0}
		widenU16(dst, []uint16{uint16(b)}, op.F16)
		if math.Float32bits(dst[0]) != math.Float32bits(got) {
			t.Fatalf("table widening of %#04x differs", b)
		}
	}
	if bf16ToF32(0x3f80) != 1 || bf16ToF32(0xc040) != -3 {
		t.Fatal("BF16ToF32 wrong")
	}
	// BF16 slices (the assembly kernel where the CPU has it, then the portable tail): every bit
	// pattern, at every length from 0 to 40 and every start offset modulo 16.
	all := make([]uint16, 1<<16)
	for b := range all {
		all[b] = uint16(b)
	}
	dst := make([]float32, len(all))
	widenU16(dst, all, op.BF16)
	for b, v := range dst {
		if math.Float32bits(v) != uint32(b)<<16 {
			t.Fatalf("bf16 %#04x widened to %#08x (asm kernel %t)", b, math.Float32bits(v), hasWidenAsm)
		}
	}
	for off := 0; off < 16; off++ {
		for n := 0; n <= 40; n++ {
			src := all[1000+off*977 : 1000+off*977+n]
			out := make([]float32, n+1)
			out[n] = 7 // must stay untouched
			widenU16(out[:n], src, op.BF16)
			for i := 0; i < n; i++ {
				if math.Float32bits(out[i]) != uint32(src[i])<<16 {
					t.Fatalf("offset %d length %d: element %d = %#08x, want %#08x", off, n, i, math.Float32bits(out[i]), uint32(src[i])<<16)
				}
			}
			if out[n] != 7 {
				t.Fatalf("offset %d length %d: wrote past the end", off, n)
			}
		}
	}
}

func TestMatMulErrors(t *testing.T) {
	w, _ := denseMatrix(t, 1, 4, 3, op.F32, 1)
	bad16 := &op.Matrix{N: 4, K: 3, DType: op.BF16, U16: make([]uint16, 11)}
	cases := []struct {
		name string
		err  error
		call func() error
	}{
		{"nil weight", op.ErrInvalidArgument, func() error { return matMulChecked(make([]float32, 4), make([]float32, 3), 1, nil) }},
		{"short x", op.ErrShape, func() error { return matMulChecked(make([]float32, 8), make([]float32, 5), 2, w) }},
		{"short y", op.ErrShape, func() error { return matMulChecked(make([]float32, 7), make([]float32, 6), 2, w) }},
		{"negative T", op.ErrShape, func() error { return matMulChecked(nil, nil, -1, w) }},
		{"short bf16", op.ErrShape, func() error { return matMulChecked(make([]float32, 4), make([]float32, 3), 1, bad16) }},
		{"bad dtype", op.ErrDType, func() error {
			return matMulChecked(make([]float32, 4), make([]float32, 3), 1, &op.Matrix{N: 4, K: 3, DType: op.GGML + 1, U16: make([]uint16, 12)})
		}},
		{"NewMatrixU16 F32", op.ErrShape, func() error { _, err := op.NewMatrixU16(2, 2, op.F32, make([]uint16, 4)); return err }},
		{"NewMatrixF32 size", op.ErrShape, func() error { _, err := op.NewMatrixF32(2, 2, make([]float32, 3)); return err }},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, c.err) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.err)
		}
	}
}

// BenchmarkMatMul runs y = x W^T at the real model's shapes: the attention/GDN projection width
// (T 512, K = N = 2560) and one expert's gate_up (2I = 1280 rows) and down (K = I = 640) for the
// ~10 rows an expert gets at T = 512, top-10 of 512. Short by default (-benchtime to extend).
func BenchmarkMatMul(b *testing.B) {
	shapes := []struct {
		name    string
		T, N, K int
	}{
		{"proj_T512_N2560_K2560", 512, 2560, 2560},
		{"expert_gateup_T10_N1280_K2560", 10, 1280, 2560},
		{"expert_down_T10_N2560_K640", 10, 2560, 640},
		{"expert_gateup_T512_N1280_K2560", 512, 1280, 2560},
	}
	for _, s := range shapes {
		for _, dt := range []op.DType{op.F32, op.BF16} {
			w, _ := denseMatrix(b, 1, s.N, s.K, dt, 0.05)
			x := optest.Floats(2, s.T*s.K, 1)
			y := make([]float32, s.T*s.N)
			b.Run(s.name+"_"+dt.String(), func(b *testing.B) {
				for b.Loop() {
					if err := matMulChecked(y, x, s.T, w); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(s.T)*float64(s.N)*float64(s.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestWeightsPrepareBudget: the CPU store widens BF16 and F16 matrices in the order given while
// the copies fit the budget (a matrix that does not fit is skipped, a later smaller one still
// widened), exactly; F32 and QAffine matrices come back as they are; Bytes counts the copies; a
// negative budget widens all, 0 none; an invalid matrix is an error.
func TestWeightsPrepareBudget(t *testing.T) {
	big, wideBig := denseMatrix(t, 1, 64, 32, op.BF16, 1)   // 8 KiB as float32
	small, wideSmall := denseMatrix(t, 2, 8, 32, op.F16, 1) // 1 KiB
	f, _ := denseMatrix(t, 3, 8, 32, op.F32, 1)
	q, _, err := optest.RandQuant(4, 8, 64, 4, 32, op.BF16, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		budget               int64
		widenBig, widenSmall bool
	}{{0, false, false}, {4096, false, true}, {8192, true, false}, {9216, true, true}, {-1, true, true}} {
		w := Backend{}.NewWeights(op.WeightOptions{WidenBudget: c.budget})
		var bytes int64
		for _, m := range []struct {
			m     *op.Matrix
			wide  []float32
			widen bool
		}{{big, wideBig, c.widenBig}, {small, wideSmall, c.widenSmall}, {f, nil, false}, {q, nil, false}} {
			got, err := w.Prepare(m.m)
			if err != nil {
				t.Fatal(err)
			}
			if !m.widen {
				if got != m.m {
					t.Fatalf("budget %d: %v [%d, %d] replaced", c.budget, m.m.DType, m.m.N, m.m.K)
				}
				continue
			}
			if got.DType != op.F32 || got.N != m.m.N || got.K != m.m.K {
				t.Fatalf("budget %d: %v [%d, %d] prepared as %v [%d, %d]", c.budget, m.m.DType, m.m.N, m.m.K, got.DType, got.N, got.K)
			}
			for i, v := range m.wide {
				if math.Float32bits(got.F32[i]) != math.Float32bits(v) {
					t.Fatalf("budget %d: element %d widened to %g, want %g", c.budget, i, got.F32[i], v)
				}
			}
			bytes += got.Bytes()
		}
		if w.Bytes() != bytes {
			t.Errorf("budget %d: Bytes %d, copies %d", c.budget, w.Bytes(), bytes)
		}
	}
	if _, err := (Backend{}).NewWeights(op.WeightOptions{WidenBudget: -1}).Prepare(&op.Matrix{N: 2, K: 3, DType: op.BF16}); !errors.Is(err, op.ErrShape) {
		t.Errorf("short matrix: %v", err)
	}
}

// TestMatMulThin: a weight with fewer column blocks or panels than cores (a router, a GDN
// layer's a and b projections, a shared expert's gate) runs in tiles of token rows over the
// cores (rowMatMul): bitwise the product of one call over all rows on one goroutine, at
// GOMAXPROCS 1, 2 and 4, in f32 (F32 and BF16 weights) and in int8 (GGML Q4_K) compute; with
// a native BLAS (STRATA_BLAS=native) an f32 product is bitwise its calls over fixed tiles of
// nativeRowTile rows, at every GOMAXPROCS.
func TestMatMulThin(t *testing.T) {
	const T, N, K = 200, 40, 512
	x := optest.Floats(21, T*K, 1)
	f32w, _ := denseMatrix(t, 22, N, K, op.F32, 0.05)
	bf16w, _ := denseMatrix(t, 23, N, K, op.BF16, 0.05)
	q4k, _, err := optest.RandGGML(24, N, K, op.GGMLQ4_K, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	int8w, err := computeStore(op.ComputeInt8, qdot.BestInt8()).Prepare(q4k)
	if err != nil || computeOf(int8w) == nil {
		t.Fatalf("no int8 form of Q4_K: %v", err)
	}
	for _, c := range []struct {
		name string
		w    *op.Matrix
	}{{"f32", f32w}, {"bf16", bf16w}, {"int8 Q4_K", int8w}} {
		want := make([]float32, T*N)
		if computeOf(c.w) != nil {
			if err := matMulCompute([][]float32{want}, N, x, T, []*op.Matrix{c.w}, false); err != nil {
				t.Fatal(err)
			}
		} else {
			scratch := make([]float32, max(1, matMulScratch(c.w)))
			tile := T
			if blas.Native() {
				tile = nativeRowTile
			}
			for t0 := 0; t0 < T; t0 += tile {
				t1 := min(T, t0+tile)
				if err := matMulBlock(want[t0*N:t1*N], N, x[t0*K:t1*K], t1-t0, c.w, 0, scratch, true); err != nil {
					t.Fatal(err)
				}
			}
		}
		denseSameAcrossProcs(t, c.name, func() []float32 {
			y := make([]float32, T*N)
			if err := matMulChecked(y, x, T, c.w); err != nil {
				t.Fatal(err)
			}
			sameSlice(t, c.name+" against one call", y, want)
			return y
		})
	}
}
