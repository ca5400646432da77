package kernels

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"syscall"
	"testing"

	"github.com/stratakernels/strata/internal/qdot"
	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// computeCase is one weight of the compute tests with its float32 values.
type computeCase struct {
	name string
	m    *op.Matrix
	wide []float32
}

func computeCases(t *testing.T, N, K int) []computeCase {
	t.Helper()
	var cs []computeCase
	for _, q := range [][2]int{{4, 64}, {8, 64}, {3, 32}, {4, 128}} {
		m, wide, err := optest.RandQuant(uint64(10*q[0]+q[1]), N, K, q[0], q[1], op.BF16, 0.05)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, computeCase{fmt.Sprintf("mlx%d-g%d", q[0], q[1]), m, wide})
	}
	m, wide, err := optest.RandFP8Block(7, N, K, op.BF16, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	cs = append(cs, computeCase{"fp8", m, wide})
	for _, gt := range op.GGMLBlockTypes {
		m, wide, err := optest.RandGGML(uint64(20+gt), N, K, gt, 0.05)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, computeCase{"ggml_" + gt.String(), m, wide})
	}
	bm, bw := denseMatrix(t, 8, N, K, op.BF16, 0.05)
	return append(cs, computeCase{"bf16", bm, bw})
}

// computeStore is a CPU weight store in mode with its kernel forced to k.
func computeStore(mode op.ComputeMode, k qdot.Kernel) *hostWeights {
	w := Backend{}.NewWeights(op.WeightOptions{Compute: mode}).(*hostWeights)
	w.c.i8k, w.c.b16k = k, k
	return w
}

// qdotRef is the product through qdot's portable kernel on the weight as stored: what the
// store's form must give bitwise (qdot's tests check the portable kernel against float64).
func qdotRef(t *testing.T, mode op.ComputeMode, m *op.Matrix, x []float32, T int) []float32 {
	t.Helper()
	f, why, err := newComputeState(mode).form(m)
	if err != nil || f == nil {
		t.Fatalf("no %v form of %s: %v %s", mode, weightFormat(m), err, why)
	}
	y := make([]float32, T*m.N)
	if mode == op.ComputeInt8 {
		var w qdot.Int8Weights
		switch m.DType {
		case op.QAffine:
			w = &qdot.Affine{N: m.N, K: m.K, Bits: m.Q.Bits, Group: m.Q.Group, Codes: m.Q.Codes, Scales: m.Q.Scales, Biases: m.Q.Biases}
		case op.FP8Block:
			w = &qdot.FP8{N: m.N, K: m.K, Codes: m.FP8.Codes, ScaleInvBF16: m.FP8.Scales}
		case op.GGML:
			w = ggmlInt8(m)
		}
		var a qdot.Int8Act
		if err := qdot.QuantizeInt8(&a, x, T, m.K, int8Block); err != nil {
			t.Fatal(err)
		}
		if err := qdot.MatMulInt8(y, m.N, &a, w, 0, m.N, qdot.Go); err != nil {
			t.Fatal(err)
		}
		return y
	}
	var a qdot.BF16Act
	if err := qdot.RoundBF16(&a, x, T, m.K); err != nil {
		t.Fatal(err)
	}
	if err := qdot.MatMulBF16(y, m.N, &a, f.b16, 0, m.N, qdot.Go); err != nil {
		t.Fatal(err)
	}
	return y
}

func sameSlice(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d (row %d) = %g, want %g", what, i, i, got[i], want[i])
		}
	}
}

// TestComputeMatMul: in int8 and bf16 modes, with every kernel of this CPU forced (qdot's
// Int8Kernels, BF16Kernels), each weight format the mode takes gives bitwise the product of
// qdot's portable kernel on the weight as stored; one-shot equals the rows run in calls of
// 13 + 1 + rest bitwise (activation blocks are per row), every GOMAXPROCS gives the same bits;
// the product is within the mode's rounding of the float64 one (int8: 3%, bf16: 1% of max|y|,
// loose: qdot's tests hold the tight bounds). Formats a mode does not take get no form and run
// in f32, bitwise as the f32 store.
func TestComputeMatMul(t *testing.T) {
	const T, N, K = 37, 100, 256
	x := optest.Floats(5, T*K, 1)
	for _, c := range computeCases(t, N, K) {
		want64 := denseLinear64(denseTo64(x), T, c.wide, N, K)
		for _, mode := range []op.ComputeMode{op.ComputeInt8, op.ComputeBF16} {
			kernels := qdot.Int8Kernels()
			if mode == op.ComputeBF16 {
				kernels = qdot.BF16Kernels()
			}
			if f32Reason(mode, c.m) != "" {
				w := computeStore(mode, kernels[0])
				p, err := w.Prepare(c.m)
				if err != nil || p.Compute != nil {
					t.Fatalf("%s in %v: %v, form %v (want none)", c.name, mode, err, p.Compute)
				}
				if !strings.Contains(w.Compute(), "f32 for "+weightFormat(c.m)) {
					t.Errorf("%s in %v: the report %q does not say it ran in f32", c.name, mode, w.Compute())
				}
				continue
			}
			ref := qdotRef(t, mode, c.m, x, T)
			for _, k := range kernels {
				t.Run(fmt.Sprintf("%s/%v/%v", c.name, mode, k), func(t *testing.T) {
					w := computeStore(mode, k)
					p, err := w.Prepare(c.m)
					if err != nil {
						t.Fatal(err)
					}
					if computeOf(p) == nil || p == c.m {
						t.Fatalf("no compute form (report %q)", w.Compute())
					}
					run := func() []float32 {
						y := make([]float32, T*N)
						if err := matMulChecked(y, x, T, p); err != nil {
							t.Fatal(err)
						}
						return y
					}
					y := run()
					sameSlice(t, "against qdot's portable kernel", y, ref)
					chunked := make([]float32, 0, T*N)
					for _, r := range [][2]int{{0, 13}, {13, 14}, {14, T}} {
						yc := make([]float32, (r[1]-r[0])*N)
						if err := matMulChecked(yc, x[r[0]*K:r[1]*K], r[1]-r[0], p); err != nil {
							t.Fatal(err)
						}
						chunked = append(chunked, yc...)
					}
					sameSlice(t, "rows in calls of 13 + 1 + rest", chunked, y)
					denseSameAcrossProcs(t, "GOMAXPROCS", run)
					tol := 0.03
					if mode == op.ComputeBF16 {
						tol = 0.01
					}
					denseCheck(t, "against float64", y, want64, tol)
					if !strings.Contains(w.Compute(), computeOf(p).String()) {
						t.Errorf("report %q does not name the form %q", w.Compute(), computeOf(p))
					}
				})
			}
		}
	}
}

// TestComputeExperts: the routed experts in int8 mode (MLX 4-bit, and GGML Q4_K gate and up
// with a Q6_K down as a Q4_K_M file holds them; gate and up apart as MLX and GGUF store them,
// and fused) give bitwise the same combined output whatever GOMAXPROCS (one expert per
// goroutine, or one at a time with each product split over the cores) and for the tokens run in
// two calls; and within the int8 rounding of the f32 experts on the same weights.
func TestComputeExperts(t *testing.T) {
	const T, E, K, D = 40, 6, 3, 256
	for _, c := range []struct {
		format string
		split  bool
		I      int
	}{{"mlx4", true, 128}, {"mlx4", false, 128}, {"ggml", true, 256}, {"ggml", false, 256}} {
		split, I := c.split, c.I
		ex := &op.Experts{E: E, D: D, I: I}
		w := computeStore(op.ComputeInt8, qdot.BestInt8())
		f32 := &op.Experts{E: E, D: D, I: I}
		gateRows := 2 * I
		if split {
			gateRows = I
			ex.Up, f32.Up = make([]*op.Matrix, E), make([]*op.Matrix, E)
		}
		for e := 0; e < E; e++ {
			mk := func(seed uint64, n, k int, down bool) (*op.Matrix, *op.Matrix) {
				m, _, err := optest.RandQuant(seed, n, k, 4, 64, op.BF16, 0.1)
				if c.format == "ggml" {
					gt := op.GGMLQ4_K
					if down {
						gt = op.GGMLQ6_K
					}
					m, _, err = optest.RandGGML(seed, n, k, gt, 0.1)
				}
				if err != nil {
					t.Fatal(err)
				}
				p, err := w.Prepare(m)
				if err != nil {
					t.Fatal(err)
				}
				if computeOf(p) == nil {
					t.Fatal("no int8 form")
				}
				return p, m
			}
			gu, gu32 := mk(uint64(3*e+1), gateRows, D, false)
			dn, dn32 := mk(uint64(3*e+2), D, I, true)
			ex.GateUp, ex.Down = append(ex.GateUp, gu), append(ex.Down, dn)
			f32.GateUp, f32.Down = append(f32.GateUp, gu32), append(f32.Down, dn32)
			if split {
				ex.Up[e], f32.Up[e] = mk(uint64(3*e+3), I, D, false)
			}
		}
		x := optest.Floats(9, T*D, 1)
		wt, idx := make([]float32, T*K), make([]int32, T*K)
		if err := topKRoute(wt, idx, optest.Floats(10, T*E, 1), T, E, K, true); err != nil {
			t.Fatal(err)
		}
		run := func(ex *op.Experts, t0, t1 int) []float32 {
			n := t1 - t0
			ye, rk := make([]float32, n*K*D), make([]int32, n*K)
			if err := moeExperts(ye, rk, x[t0*D:t1*D], n, idx[t0*K:t1*K], K, ex); err != nil {
				t.Fatal(err)
			}
			out := make([]float32, n*D)
			if err := moeCombine(out, ye, n*K, rk, wt[t0*K:t1*K], n, K, D); err != nil {
				t.Fatal(err)
			}
			return out
		}
		name := fmt.Sprintf("%s split=%v", c.format, split)
		one := run(ex, 0, T)
		denseSameAcrossProcs(t, name, func() []float32 { return run(ex, 0, T) })
		sameSlice(t, name+" in calls of 17 + rest", append(run(ex, 0, 17), run(ex, 17, T)...), one)
		ref := run(f32, 0, T)
		denseCheck(t, name+" against the f32 experts", one, denseTo64(ref), 0.03)
	}
}

// TestComputeModes: the mode names parse and print, a bad one is refused by name; a store
// asked for a value outside the modes runs f32 and says so; the f32 store gives no matrix a
// compute form (its products stay bitwise those of before the modes).
func TestComputeModes(t *testing.T) {
	for i, name := range op.ComputeModes {
		c, err := op.ParseComputeMode(name)
		if err != nil || int(c) != i || c.String() != name {
			t.Errorf("%q: %v %v", name, c, err)
		}
	}
	if c, err := op.ParseComputeMode(""); err != nil || c != op.ComputeF32 {
		t.Errorf(`"": %v %v, want f32`, c, err)
	}
	for _, bad := range []string{"fp16", "INT8", "int4", " f32"} {
		_, err := op.ParseComputeMode(bad)
		if !errors.Is(err, op.ErrInvalidArgument) || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("%q: error %v, want ErrInvalidArgument naming it", bad, err)
		}
	}
	m, _, err := optest.RandQuant(1, 64, 128, 4, 64, op.BF16, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []op.WeightOptions{{}, {Compute: op.ComputeMode(7)}} {
		w := Backend{}.NewWeights(o)
		p, err := w.Prepare(m)
		if err != nil || p != m || p.Compute != nil {
			t.Errorf("%v: Prepare gave %p (form %v, err %v), want the matrix itself", o.Compute, p, p.Compute, err)
		}
		if o.Compute != op.ComputeF32 && !strings.Contains(w.Compute(), "ComputeMode(7) is no compute mode") {
			t.Errorf("report %q does not name the bad mode", w.Compute())
		}
	}
}

// BenchmarkComputeExperts: the routed experts of the qwen3next slice's MoE layer (T = 512
// tokens, 64 experts, top-10, D 2048, I 512: about 80 rows an expert) on MLX 4-bit and 8-bit
// weights (groups of 64, gate and up apart as MLX stores them), f32 (dequantized per call)
// against int8 (panels packed per call) and bf16. GFLOP/s counts 2 T K 3 D I per call; cpu-GFLOP/s
// divides by the process's CPU time instead (user + system, all threads), which other
// processes on a shared machine do not inflate.
func BenchmarkComputeExperts(b *testing.B) {
	const T, E, K, D, I = 512, 64, 10, 2048, 512
	x := optest.Floats(3, T*D, 1)
	wt, idx := make([]float32, T*K), make([]int32, T*K)
	if err := topKRoute(wt, idx, optest.Floats(4, T*E, 1), T, E, K, true); err != nil {
		b.Fatal(err)
	}
	ye, rk := make([]float32, T*K*D), make([]int32, T*K)
	flops := 2 * float64(T*K) * 3 * D * I
	for _, bits := range []int{4, 8} {
		for _, mode := range []op.ComputeMode{op.ComputeF32, op.ComputeInt8, op.ComputeBF16} {
			w := Backend{}.NewWeights(op.WeightOptions{Compute: mode})
			ex := &op.Experts{E: E, D: D, I: I, Up: make([]*op.Matrix, E)}
			mk := func(seed uint64, n, k int) *op.Matrix {
				m, _, err := optest.RandQuant(seed, n, k, bits, 64, op.BF16, 0.05)
				if err != nil {
					b.Fatal(err)
				}
				p, err := w.Prepare(m)
				if err != nil {
					b.Fatal(err)
				}
				return p
			}
			for e := 0; e < E; e++ {
				ex.GateUp = append(ex.GateUp, mk(uint64(3*e+1), I, D))
				ex.Up[e] = mk(uint64(3*e+2), I, D)
				ex.Down = append(ex.Down, mk(uint64(3*e+3), D, I))
			}
			b.Run(fmt.Sprintf("mlx%d/%v", bits, mode), func(b *testing.B) {
				c0 := processCPU()
				for b.Loop() {
					if err := moeExperts(ye, rk, x, T, idx, K, ex); err != nil {
						b.Fatal(err)
					}
				}
				c1 := processCPU()
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				b.ReportMetric(flops*float64(b.N)/(c1-c0)/1e9, "cpu-GFLOP/s")
			})
		}
	}
}

// processCPU is the process's user and system CPU time in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
