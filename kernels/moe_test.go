package kernels

import (
	"github.com/stratakernels/strata/op"

	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratakernels/strata/internal/blas"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op/optest"
)

// denseRouteRef64 is softmax over E in float64 then a full sort by (p desc, index asc)
// (optest.RefTopKRoute).
func denseRouteRef64(logits []float32, T, E, K int, norm bool) ([]float64, []int32) {
	w, idx, _ := optest.RefTopKRoute(logits, T, E, K, norm)
	return w, idx
}

// denseExpert64 is down(silu(gate x) * up x) in float64 for one token row x [D], with gu [2I, D]
// (gate rows first) and down [D, I].
func denseExpert64(x []float64, gu, down []float32, D, I int) []float64 {
	a := denseLinear64(x, 1, gu, 2*I, D)
	h := make([]float64, I)
	for i := range h {
		g := a[i]
		h[i] = g / (1 + math.Exp(-g)) * a[I+i]
	}
	return denseLinear64(h, 1, down, D, I)
}

func TestTopKRouteCases(t *testing.T) {
	for i, c := range optest.MoECases() {
		name := fmt.Sprintf("T%d_E%d_K%d_norm%v", c.T, c.E, c.K, c.Norm)
		logits := optest.Floats(uint64(600+i), c.T*c.E, 2)
		w := make([]float32, c.T*c.K)
		idx := make([]int32, c.T*c.K)
		if err := topKRoute(w, idx, logits, c.T, c.E, c.K, c.Norm); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ww, wi := denseRouteRef64(logits, c.T, c.E, c.K, c.Norm)
		for j := range wi {
			if idx[j] != wi[j] {
				t.Fatalf("%s: slot %d picks expert %d, want %d", name, j, idx[j], wi[j])
			}
		}
		denseCheck(t, name, w, ww, 1e-6)
	}
	// ties: equal logits go to the lower expert index, in slot order
	logits := []float32{1, 3, 3, 0, 3, 1}
	w := make([]float32, 4)
	idx := make([]int32, 4)
	if err := topKRoute(w, idx, logits, 1, 6, 4, true); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(idx) != "[1 2 4 0]" {
		t.Fatalf("tie order %v, want [1 2 4 0]", idx)
	}
}

func TestMoEExpertsCases(t *testing.T) { forEachKernel(t, testMoEExpertsCases) }

func testMoEExpertsCases(t *testing.T) {
	for i, c := range optest.MoECases() {
		name := fmt.Sprintf("T%d_E%d_K%d_D%d_I%d_%s", c.T, c.E, c.K, c.D, c.I, c.DType)
		ex := &op.Experts{E: c.E, D: c.D, I: c.I}
		gw, dw := make([][]float32, c.E), make([][]float32, c.E)
		for e := 0; e < c.E; e++ {
			var gu, dn *op.Matrix
			gu, gw[e] = denseMatrix(t, uint64(1000*i+2*e), 2*c.I, c.D, c.DType, 0.1)
			dn, dw[e] = denseMatrix(t, uint64(1000*i+2*e+1), c.D, c.I, c.DType, 0.1)
			ex.GateUp = append(ex.GateUp, gu)
			ex.Down = append(ex.Down, dn)
		}
		x := optest.Floats(uint64(700+i), c.T*c.D, 1)
		logits := optest.Floats(uint64(800+i), c.T*c.E, 2)
		w := make([]float32, c.T*c.K)
		idx := make([]int32, c.T*c.K)
		if err := topKRoute(w, idx, logits, c.T, c.E, c.K, c.Norm); err != nil {
			t.Fatal(err)
		}
		if c.T > 2 {
			idx[c.K+1] = -1 // an empty slot
		}
		run := func() ([]float32, []float32, []int32) {
			ye := make([]float32, c.T*c.K*c.D)
			rk := make([]int32, c.T*c.K)
			if err := moeExperts(ye, rk, x, c.T, idx, c.K, ex); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out := make([]float32, c.T*c.D)
			if err := moeCombine(out, ye, c.T*c.K, rk, w, c.T, c.K, c.D); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return out, ye, rk
		}
		out, ye, rk := run()
		want := make([]float64, c.T*c.D)
		for tk := 0; tk < c.T; tk++ {
			xt := denseTo64(x[tk*c.D : (tk+1)*c.D])
			for j := 0; j < c.K; j++ {
				e := idx[tk*c.K+j]
				if e < 0 {
					if rk[tk*c.K+j] != -1 {
						t.Fatalf("%s: empty slot got row %d", name, rk[tk*c.K+j])
					}
					continue
				}
				y := denseExpert64(xt, gw[e], dw[e], c.D, c.I)
				// the unweighted row in ye
				denseCheck(t, name+" ye row", ye[int(rk[tk*c.K+j])*c.D:int(rk[tk*c.K+j]+1)*c.D], y, 2e-6)
				for d := range y {
					want[tk*c.D+d] += float64(w[tk*c.K+j]) * y[d]
				}
			}
		}
		denseCheck(t, name, out, want, 2e-6)
		if c.T == 65 {
			denseSameAcrossProcs(t, name, func() []float32 { o, _, _ := run(); return o })
		}
	}
}

func TestMoECombineGolden(t *testing.T) {
	f, err := safetensors.Open("../testdata/goldens/op_attn_moe.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	get := func(name string) *safetensors.Tensor {
		tt, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	ye, err := get("moe.ye").Float32()
	if err != nil {
		t.Fatal(err)
	}
	rk, err := get("moe.rk").Int32()
	if err != nil {
		t.Fatal(err)
	}
	w, err := get("moe.w").Float32()
	if err != nil {
		t.Fatal(err)
	}
	want, err := get("moe.out").Float32()
	if err != nil {
		t.Fatal(err)
	}
	rows, D := int(get("moe.ye").Shape[0]), int(get("moe.ye").Shape[1])
	T, K := int(get("moe.rk").Shape[0]), int(get("moe.rk").Shape[1])
	out := make([]float32, T*D)
	if err := moeCombine(out, ye, rows, rk, w, T, K, D); err != nil {
		t.Fatal(err)
	}
	empty := 0
	for _, r := range rk {
		if r < 0 {
			empty++
		}
	}
	r := denseMaxRel(out, denseTo64(want))
	t.Logf("moe_comb golden: T=%d K=%d D=%d rows=%d, %d empty slots: max |diff| / max |expected| = %.3g", T, K, D, rows, empty, r)
	if r > 1e-4 {
		t.Fatalf("max relative diff %.3g > 1e-4", r)
	}
}

func TestSharedExpertMLP(t *testing.T) { forEachKernel(t, testSharedExpertMLP) }

func testSharedExpertMLP(t *testing.T) {
	for _, dt := range optest.WeightDTypes {
		for _, T := range []int{1, 17, 65} {
			const D, I = 96, 40
			g, gw := denseMatrix(t, 1, I, D, dt, 0.1)
			u, uw := denseMatrix(t, 2, I, D, dt, 0.1)
			dn, dw := denseMatrix(t, 3, D, I, dt, 0.1)
			sg := optest.Floats(4, D, 0.1)
			se := &sharedExpert{D: D, I: I, Gate: g, Up: u, Down: dn, GateW: sg}
			x := optest.Floats(5, T*D, 1)
			y := make([]float32, T*D)
			if err := sharedExpertMLP(y, x, T, se); err != nil {
				t.Fatal(err)
			}
			gu := append(append([]float32(nil), gw...), uw...)
			want := make([]float64, T*D)
			for tk := 0; tk < T; tk++ {
				xt := denseTo64(x[tk*D : (tk+1)*D])
				var s float64
				for d := range xt {
					s += xt[d] * float64(sg[d])
				}
				gate := 1 / (1 + math.Exp(-s))
				for d, v := range denseExpert64(xt, gu, dw, D, I) {
					want[tk*D+d] = gate * v
				}
			}
			denseCheck(t, fmt.Sprintf("shared %s T%d", dt, T), y, want, 2e-6)
		}
	}
}

func TestMoEErrors(t *testing.T) {
	gu, _ := denseMatrix(t, 1, 8, 6, op.F32, 1)
	dn, _ := denseMatrix(t, 2, 6, 4, op.F32, 1)
	ex := &op.Experts{E: 2, D: 6, I: 4, GateUp: []*op.Matrix{gu, gu}, Down: []*op.Matrix{dn, dn}}
	badEx := &op.Experts{E: 2, D: 6, I: 4, GateUp: []*op.Matrix{gu, dn}, Down: []*op.Matrix{dn, dn}}
	x := make([]float32, 2*6)
	ye := make([]float32, 4*6)
	rk := make([]int32, 4)
	nan := float32(math.NaN())
	cases := []struct {
		name string
		err  error
		call func() error
	}{
		{"K > E", op.ErrInvalidArgument, func() error {
			return topKRoute(make([]float32, 3), make([]int32, 3), make([]float32, 2), 1, 2, 3, true)
		}},
		{"K 0", op.ErrInvalidArgument, func() error { return topKRoute(nil, nil, make([]float32, 2), 1, 2, 0, true) }},
		{"NaN logit", op.ErrInvalidArgument, func() error {
			return topKRoute(make([]float32, 1), make([]int32, 1), []float32{0, nan}, 1, 2, 1, true)
		}},
		{"route lengths", op.ErrShape, func() error {
			return topKRoute(make([]float32, 1), make([]int32, 2), make([]float32, 2), 1, 2, 2, true)
		}},
		{"expert idx", op.ErrInvalidArgument, func() error { return moeExperts(ye, rk, x, 2, []int32{0, 1, 2, 0}, 2, ex) }},
		{"expert idx -2", op.ErrInvalidArgument, func() error { return moeExperts(ye, rk, x, 2, []int32{0, 1, -2, 0}, 2, ex) }},
		{"expert shapes", op.ErrShape, func() error { return moeExperts(ye, rk, x, 2, []int32{0, 1, 1, 0}, 2, badEx) }},
		{"nil experts", op.ErrInvalidArgument, func() error { return moeExperts(ye, rk, x, 2, []int32{0, 1, 1, 0}, 2, nil) }},
		{"ye length", op.ErrShape, func() error { return moeExperts(ye[:20], rk, x, 2, []int32{0, 1, 1, 0}, 2, ex) }},
		{"rk range", op.ErrInvalidArgument, func() error {
			return moeCombine(make([]float32, 6), ye, 4, []int32{0, 4}, []float32{1, 1}, 1, 2, 6)
		}},
		{"rk -2", op.ErrInvalidArgument, func() error {
			return moeCombine(make([]float32, 6), ye, 4, []int32{0, -2}, []float32{1, 1}, 1, 2, 6)
		}},
		{"rows vs ye", op.ErrShape, func() error {
			return moeCombine(make([]float32, 6), ye, 5, []int32{0, 1}, []float32{1, 1}, 1, 2, 6)
		}},
		{"out length", op.ErrShape, func() error {
			return moeCombine(make([]float32, 5), ye, 4, []int32{0, 1}, []float32{1, 1}, 1, 2, 6)
		}},
		{"shared nil", op.ErrInvalidArgument, func() error { return sharedExpertMLP(x, x, 2, nil) }},
		{"shared shapes", op.ErrShape, func() error {
			return sharedExpertMLP(make([]float32, 12), x, 2, &sharedExpert{D: 6, I: 4, Gate: gu, Up: gu, Down: dn})
		}},
		{"swiglu", op.ErrShape, func() error { return swiGLU(make([]float32, 4), make([]float32, 7), 1, 4) }},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, c.err) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.err)
		}
	}
}

// TestFastActivations checks the polynomial sigmoid and silu against their float64 definitions
// over a dense grid (to one float32 ulp, relative) and at the edges.
func TestFastActivations(t *testing.T) {
	for i := -400000; i <= 400000; i++ {
		x := float32(i) * 0.0005
		for _, c := range []struct {
			name string
			got  float32
			want float64
		}{
			{"sigmoid", sigmoidFast32(x), sigmoid64(float64(x))},
			{"silu", siluFast32(x), float64(x) * sigmoid64(float64(x))},
		} {
			if d := math.Abs(float64(c.got) - c.want); d > 1.2e-7*math.Abs(c.want) && d > 1e-44 {
				t.Fatalf("%s(%g) = %g, want %g", c.name, x, c.got, c.want)
			}
		}
	}
	nan := float32(math.NaN())
	if !math.IsNaN(float64(sigmoidFast32(nan))) || sigmoidFast32(float32(math.Inf(1))) != 1 ||
		sigmoidFast32(float32(math.Inf(-1))) != 0 || sigmoidFast32(-200) != 0 || sigmoidFast32(200) != 1 {
		t.Fatal("sigmoidFast32 edge cases wrong")
	}
}

// BenchmarkMoEExperts runs the routed experts of one layer at the real width (D 2560, I 640,
// top-10) for 64 experts (the benchmark slice) at T = 512, weights op.F32 (widened at load) and
// op.BF16 (widened per call). Short by default (-benchtime to extend).
func BenchmarkMoEExperts(b *testing.B) {
	const T, E, K, D, I = 512, 64, 10, 2560, 640
	for _, dt := range []op.DType{op.F32, op.BF16} {
		ex := &op.Experts{E: E, D: D, I: I}
		for e := 0; e < E; e++ {
			gu, _ := denseMatrix(b, uint64(2*e+1), 2*I, D, dt, 0.05)
			dn, _ := denseMatrix(b, uint64(2*e+2), D, I, dt, 0.05)
			ex.GateUp, ex.Down = append(ex.GateUp, gu), append(ex.Down, dn)
		}
		x := optest.Floats(3, T*D, 1)
		w, idx := make([]float32, T*K), make([]int32, T*K)
		if err := topKRoute(w, idx, optest.Floats(4, T*E, 1), T, E, K, true); err != nil {
			b.Fatal(err)
		}
		ye, rk := make([]float32, T*K*D), make([]int32, T*K)
		b.Run(dt.String(), func(b *testing.B) {
			for b.Loop() {
				if err := moeExperts(ye, rk, x, T, idx, K, ex); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(2*T*K*3*D*I*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// moeExpertsPerExpert is the schedule the tiles replaced, kept as their reference and the
// benchmark's baseline: one expert per goroutine (largest first), each of its products one
// MatMul over all its rows on that goroutine, when there are at least two experts per worker;
// else the experts one at a time, each MatMul split over the cores. ye rows grouped as
// moeExperts groups them.
func moeExpertsPerExpert(ye []float32, x []float32, idx []int32, K int, ex *op.Experts, workers int) error {
	D, I := ex.D, ex.I
	first := make([]int, ex.E+1)
	for _, e := range idx {
		if e >= 0 {
			first[e+1]++
		}
	}
	maxRows := 0
	for e := 1; e <= ex.E; e++ {
		maxRows = max(maxRows, first[e])
		first[e] += first[e-1]
	}
	next := append([]int(nil), first[:ex.E]...)
	slots := make([]int32, first[ex.E]) // row -> slot
	for i, e := range idx {
		if e >= 0 {
			slots[next[e]] = int32(i)
			next[e]++
		}
	}
	var order []int
	for e := 0; e < ex.E; e++ {
		if first[e+1] > first[e] {
			order = append(order, e)
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		return first[order[i]+1]-first[order[i]] > first[order[j]+1]-first[order[j]]
	})
	perExpert := workers > 1 && len(order) >= 2*workers
	if !perExpert {
		workers = 1
	}
	run := func(e int, xg, gu, h []float32) error {
		n := first[e+1] - first[e]
		for r := 0; r < n; r++ {
			tk := int(slots[first[e]+r]) / K
			copy(xg[r*D:(r+1)*D], x[tk*D:(tk+1)*D])
		}
		xg, gu, h = xg[:n*D], gu[:n*2*I], h[:n*I]
		var up *computeForm
		if ex.Split() {
			up = computeOf(ex.Up[e])
		}
		if g := computeOf(ex.GateUp[e]); g != nil && up != nil && up.mode == g.mode {
			if err := matMulCompute([][]float32{gu, gu[I:]}, 2*I, xg, n, []*op.Matrix{ex.GateUp[e], ex.Up[e]}, !perExpert); err != nil {
				return err
			}
		} else {
			if err := matMulOld(gu, 2*I, xg, n, ex.GateUp[e], !perExpert); err != nil {
				return err
			}
			if ex.Split() {
				if err := matMulOld(gu[I:], 2*I, xg, n, ex.Up[e], !perExpert); err != nil {
					return err
				}
			}
		}
		swigluRange(h, gu, 0, n, I)
		return matMulOld(ye[first[e]*D:], D, h, n, ex.Down[e], !perExpert)
	}
	var taken atomic.Int64
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			xg, gu, h := make([]float32, maxRows*D), make([]float32, maxRows*2*I), make([]float32, maxRows*I)
			for {
				i := int(taken.Add(1) - 1)
				if i >= len(order) {
					return
				}
				if err := run(order[i], xg, gu, h); err != nil && errs[g] == nil {
					errs[g] = err
				}
			}
		}(g)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// matMulOld is the MatMul the replaced schedule called: row t at y[t*ldy:], and with parallel
// false every column block on the calling goroutine.
func matMulOld(y []float32, ldy int, x []float32, T int, w *op.Matrix, parallel bool) error {
	if computeOf(w) != nil {
		return matMulCompute([][]float32{y}, ldy, x, T, []*op.Matrix{w}, parallel)
	}
	nb := gemmBlockRows(w.N, w.K)
	nblk := (w.N + nb - 1) / nb
	grain := nblk
	if parallel {
		grain = 1
	}
	errs := make([]error, nblk)
	parallelFor(nblk, grain, func(lo, hi int) {
		scratch := make([]float32, matMulScratch(w))
		for b := lo; b < hi; b++ {
			errs[b] = matMulBlock(y, ldy, x, T, w, b, scratch, blas.Concurrent())
		}
	})
	return errors.Join(errs...)
}

// TestMoETilesBitwise: the tiled experts (tiles over every core, rows cut into blocks, waves)
// against the schedule they replaced (moeExpertsPerExpert), bitwise, for every weight kind the experts take and every compute
// mode, fused and split gate/up, on 1 to 64 workers (64 cuts every expert's rows into blocks
// where the rows' bits allow it: strata's SGEMM and the compute forms) and waves of 1 to all
// experts. An empty slot and an expert without rows are included.
func TestMoETilesBitwise(t *testing.T) {
	const T, E, K, D, I = 150, 7, 3, 256, 256
	x := optest.Floats(21, T*D, 1)
	wt, idx := make([]float32, T*K), make([]int32, T*K)
	logits := optest.Floats(22, T*E, 1)
	for tk := 0; tk < T; tk++ {
		logits[tk*E+E-1] = -30 // expert E-1 gets no rows
	}
	if err := topKRoute(wt, idx, logits, T, E, K, true); err != nil {
		t.Fatal(err)
	}
	idx[4] = -1
	kinds := []struct {
		name string
		make func(seed uint64, n, k int, down bool) (*op.Matrix, []float32, error)
	}{
		{"f32", func(s uint64, n, k int, _ bool) (*op.Matrix, []float32, error) {
			return optest.RandMatrix(s, n, k, op.F32, 0.1)
		}},
		{"bf16", func(s uint64, n, k int, _ bool) (*op.Matrix, []float32, error) {
			return optest.RandMatrix(s, n, k, op.BF16, 0.1)
		}},
		{"f16", func(s uint64, n, k int, _ bool) (*op.Matrix, []float32, error) {
			return optest.RandMatrix(s, n, k, op.F16, 0.1)
		}},
		{"mlx4", func(s uint64, n, k int, _ bool) (*op.Matrix, []float32, error) {
			return optest.RandQuant(s, n, k, 4, 64, op.BF16, 0.1)
		}},
		{"fp8", func(s uint64, n, k int, _ bool) (*op.Matrix, []float32, error) {
			return optest.RandFP8Block(s, n, k, op.BF16, 0.1)
		}},
		{"ggml", func(s uint64, n, k int, down bool) (*op.Matrix, []float32, error) {
			if down {
				return optest.RandGGML(s, n, k, op.GGMLQ6_K, 0.1)
			}
			return optest.RandGGML(s, n, k, op.GGMLQ4_K, 0.1)
		}},
	}
	for _, kind := range kinds {
		for _, mode := range []op.ComputeMode{op.ComputeF32, op.ComputeInt8, op.ComputeBF16} {
			for _, split := range []bool{false, true} {
				name := fmt.Sprintf("%s/%v/split=%v", kind.name, mode, split)
				store := Backend{}.NewWeights(op.WeightOptions{Compute: mode})
				ex := &op.Experts{E: E, D: D, I: I}
				if split {
					ex.Up = make([]*op.Matrix, E)
				}
				mk := func(seed uint64, n, k int, down bool) *op.Matrix {
					m, _, err := kind.make(seed, n, k, down)
					if err != nil {
						t.Fatal(err)
					}
					p, err := store.Prepare(m)
					if err != nil {
						t.Fatal(err)
					}
					return p
				}
				for e := 0; e < E; e++ {
					if split {
						ex.GateUp = append(ex.GateUp, mk(uint64(3*e+1), I, D, false))
						ex.Up[e] = mk(uint64(3*e+2), I, D, false)
					} else {
						ex.GateUp = append(ex.GateUp, mk(uint64(3*e+1), 2*I, D, false))
					}
					ex.Down = append(ex.Down, mk(uint64(3*e+3), D, I, true))
				}
				want := make([]float32, T*K*D)
				if err := moeExpertsPerExpert(want, x, idx, K, ex, runtime.GOMAXPROCS(0)); err != nil {
					t.Fatal(err)
				}
				for _, workers := range []int{1, 2, 3, 16, 64} {
					for _, wave := range []int{1, 100, T * K} {
						ye := optest.Floats(23, T*K*D, 1) // stale values: every row is written
						rk := make([]int32, T*K)
						if err := moeRun(ye, rk, x, idx, K, ex, workers, wave); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						for i := range want {
							if math.Float32bits(ye[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%s workers %d wave %d: element %d (row %d) = %g, want %g bitwise",
									name, workers, wave, i, i/D, ye[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// TestMoEDownLag: in a wave's list, a block's first down tile comes at least twice the workers
// tiles after its last gate/up tile (the cores take tiles in list order, so its SwiGLU is done
// by then), unless every gate/up tile of the wave comes before it; also where the experts'
// formats differ (their tiles a block differ). Fails with a fixed lag of two blocks on 16 cores.
func TestMoEDownLag(t *testing.T) {
	const E, D, I = 40, 256, 256
	store := Backend{}.NewWeights(op.WeightOptions{Compute: op.ComputeInt8})
	for _, mixed := range []bool{false, true} {
		ex := &op.Experts{E: E, D: D, I: I}
		for e := range E {
			for _, sh := range [][2]int{{2 * I, D}, {D, I}} {
				m, _, err := optest.RandQuant(uint64(e+1), sh[0], sh[1], 4, 64, op.BF16, 0.1)
				if mixed && e%3 != 0 { // f32 weights: column blocks of gemmBlockRows, not panels
					m, _, err = optest.RandMatrix(uint64(e+1), sh[0], sh[1], op.F32, 0.1)
				}
				if err != nil {
					t.Fatal(err)
				}
				if m, err = store.Prepare(m); err != nil {
					t.Fatal(err)
				}
				if sh[0] == D {
					ex.Down = append(ex.Down, m)
				} else {
					ex.GateUp = append(ex.GateUp, m)
				}
			}
		}
		blocks := make([]moeBlock, E)
		for e := range blocks {
			blocks[e] = moeBlock{e: e, r0: 10 * e, r1: 10*e + 10}
		}
		for _, workers := range []int{1, 2, 3, 16, 64} {
			for _, cranges := range []int{1, 4} {
				name := fmt.Sprintf("mixed %v workers %d cranges %d", mixed, workers, cranges)
				s := &moeSchedule{ex: ex, workers: workers, cranges: cranges}
				want := 0
				for _, blk := range blocks {
					want += len(s.upTiles(nil, 0, blk.e)) + len(s.colTiles(nil, 0, ex.Down[blk.e], nil, -1))
				}
				tiles := s.list(blocks)
				lastUp, firstDown, lastAnyUp := map[int]int{}, map[int]int{}, 0
				for i, tl := range tiles {
					if tl.off >= 0 {
						lastUp[tl.blk], lastAnyUp = i, i
					} else if _, ok := firstDown[tl.blk]; !ok {
						firstDown[tl.blk] = i
					}
				}
				if len(tiles) != want || len(firstDown) != len(blocks) {
					t.Fatalf("%s: %d tiles, %d blocks with down tiles; want %d, %d", name, len(tiles), len(firstDown), want, len(blocks))
				}
				for b := range blocks {
					if d := firstDown[b] - lastUp[b]; d < 2*workers && firstDown[b] < lastAnyUp {
						t.Fatalf("%s: block %d's first down tile is %d tiles after its last gate/up tile, want at least %d",
							name, b, d, 2*workers)
					}
				}
			}
		}
	}
}

// BenchmarkMoESchedule: the routed experts of a qwen3next slice layer (64 experts, top-10,
// D 2048, I 512) at T = 512 and 2048, the tiles (new) against the schedule they replaced
// (old, moeExpertsPerExpert), interleaved call by call in one process (the order alternating),
// for f32 compute on F32 weights (gate and up fused) and BF16 weights (apart, as the slice
// stores them) and for MLX 4-bit weights in int8 and bf16 compute.
// Reports each one's ms per call (wall) and cpu-ms (the process's CPU time, which other
// processes on a shared machine do not inflate), and new/old of both.
func BenchmarkMoESchedule(b *testing.B) {
	const E, K, D, I = 64, 10, 2048, 512
	for _, kind := range []string{"f32-F32", "f32-BF16", "int8-mlx4", "bf16-mlx4"} {
		mode, wdt := op.ComputeF32, op.F32
		switch kind {
		case "f32-BF16":
			wdt = op.BF16
		case "int8-mlx4":
			mode = op.ComputeInt8
		case "bf16-mlx4":
			mode = op.ComputeBF16
		}
		store := Backend{}.NewWeights(op.WeightOptions{Compute: mode})
		ex := &op.Experts{E: E, D: D, I: I}
		shapes := [][2]int{{2 * I, D}, {D, I}}
		if wdt == op.BF16 {
			// gate and up apart, as the qwen3next slice's checkpoint stores them
			ex.Up = make([]*op.Matrix, E)
			shapes = [][2]int{{I, D}, {I, D}, {D, I}}
		}
		for e := 0; e < E; e++ {
			for j, sh := range shapes {
				var m *op.Matrix
				var err error
				if mode == op.ComputeF32 {
					m, _, err = optest.RandMatrix(uint64(3*e+j+1), sh[0], sh[1], wdt, 0.05)
				} else {
					m, _, err = optest.RandQuant(uint64(3*e+j+1), sh[0], sh[1], 4, 64, op.BF16, 0.05)
				}
				if err != nil {
					b.Fatal(err)
				}
				if m, err = store.Prepare(m); err != nil {
					b.Fatal(err)
				}
				switch {
				case j == 0:
					ex.GateUp = append(ex.GateUp, m)
				case j == len(shapes)-1:
					ex.Down = append(ex.Down, m)
				default:
					ex.Up[e] = m
				}
			}
		}
		for _, T := range []int{512, 2048} {
			x := optest.Floats(3, T*D, 1)
			wt, idx := make([]float32, T*K), make([]int32, T*K)
			if err := topKRoute(wt, idx, optest.Floats(4, T*E, 1), T, E, K, true); err != nil {
				b.Fatal(err)
			}
			ye, rk := make([]float32, T*K*D), make([]int32, T*K)
			b.Run(fmt.Sprintf("%s/T%d", kind, T), func(b *testing.B) {
				var wall, cpu [2]float64 // old, new
				step := func(v int) {
					t0, c0 := time.Now(), processCPU()
					var err error
					if v == 0 {
						err = moeExpertsPerExpert(ye, x, idx, K, ex, runtime.GOMAXPROCS(0))
					} else {
						err = moeExperts(ye, rk, x, T, idx, K, ex)
					}
					if err != nil {
						b.Fatal(err)
					}
					wall[v] += time.Since(t0).Seconds()
					cpu[v] += processCPU() - c0
				}
				i := 0
				for b.Loop() {
					step(i % 2)
					step(1 - i%2)
					i++
				}
				n := float64(b.N)
				b.ReportMetric(1e3*wall[0]/n, "old-ms")
				b.ReportMetric(1e3*wall[1]/n, "new-ms")
				b.ReportMetric(1e3*cpu[0]/n, "old-cpu-ms")
				b.ReportMetric(1e3*cpu[1]/n, "new-cpu-ms")
				b.ReportMetric(wall[1]/wall[0], "new/old")
				b.ReportMetric(cpu[1]/cpu[0], "new/old-cpu")
			})
		}
	}
}

// TestAxpyKernels: the MoE combine's axpy is, on every kernel set, bitwise the unfused float32
// dst + float32(w*src) of each element, whatever the length.
func TestAxpyKernels(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		for _, n := range []int{1, 7, 8, 13, 64, 2051} {
			dst, src := make([]float32, n), make([]float32, n)
			for i := range dst {
				dst[i], src[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			w := float32(r.NormFloat64())
			want := make([]float32, n)
			for i := range want {
				want[i] = dst[i] + float32(w*src[i])
			}
			axpy(dst, src, w)
			if !slices.Equal(dst, want) {
				t.Fatalf("n %d: axpy differs from the unfused sum", n)
			}
		}
	})
}
