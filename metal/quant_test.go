package metal

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratakernels/strata/emu"

	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// The quantized kernels (quant.metal, quant_tensor.metal) on the emulator: every kernel of op
// "qmm" and its grouped form against the float64 references on the dequantized weights
// (optest.Dequant), for every bit width, group size and scale dtype, ragged row counts (T = 1, 3,
// 17, 65), N and K that are not multiples of the tiles (K = 3 groups); qmm_affine and
// qmm_affine_tensor bitwise equal to gemm_w32 on the dequantized float32 weight; the gathers of
// Embed and PLE bitwise equal to the dequantized rows; schedules, ASan and threadgroup memory.

// quantFormat is one storage format of op.QAffine.
type quantFormat struct {
	bits, group int
	dt          op.DType
}

func (f quantFormat) String() string { return fmt.Sprintf("b%d_g%d_%v", f.bits, f.group, f.dt) }

// quantFormats is every bit width x group size x scale dtype.
func quantFormats() []quantFormat {
	var fs []quantFormat
	for _, bits := range op.QuantBits {
		for _, g := range op.QuantGroups {
			for _, dt := range []op.DType{op.BF16, op.F16} {
				fs = append(fs, quantFormat{bits, g, dt})
			}
		}
	}
	return fs
}

// quantTol bounds max |got - want| / max |want| of the quantized GEMMs against the float64
// reference: MatMul's default times OpTolScale (float32 sums in tile or lane order).
func quantTol() float64 { return optest.Tolerances()["MatMul.y"] * OpTolScale }

// randQuant is optest.RandQuant with the weight's dense twin: the dequantized values as an F32
// matrix (what gemm_w32 must agree with bitwise).
func randQuant(t *testing.T, seed uint64, n, k int, f quantFormat, scale float32) (q, dense *op.Matrix) {
	t.Helper()
	q, w, err := optest.RandQuant(seed, n, k, f.bits, f.group, f.dt, scale)
	if err != nil {
		t.Fatal(err)
	}
	dense, err = op.NewMatrixF32(n, k, w)
	if err != nil {
		t.Fatal(err)
	}
	return q, dense
}

// quantKernels are the kernels of op "qmm"; "" is the host's choice from the shapes.
var quantKernels = []string{"", qmmKernel, qmvKernel, qmmTensorKernel}

func preferQMM(t *testing.T, b *Backend, kernel string) {
	t.Helper()
	if err := b.Prefer("qmm", kernel); err != nil {
		t.Fatal(err)
	}
}

// matMuls runs y = x W^T for every x of xs (rows ts) in one Pass and returns the ys.
func matMuls(t *testing.T, b *Backend, w *op.Matrix, ts []int, xs [][]float32) [][]float32 {
	t.Helper()
	ys := make([][]float32, len(ts))
	args := make([]*op.MatMul, len(ts))
	var ptrs []any
	for i, T := range ts {
		ys[i] = make([]float32, T*w.N)
		args[i] = &op.MatMul{Y: f32(ys[i]), X: f32(xs[i]), T: T, W: w}
		ptrs = append(ptrs, args[i])
	}
	exec(t, b, func(p op.Pass) error {
		for _, a := range args {
			if err := p.MatMul(*a); err != nil {
				return err
			}
		}
		return nil
	}, ptrs...)
	return ys
}

// TestQuantMatMul: for every format, W [37, 3*group] at T = 1, 3, 17 and 65 with each kernel of
// op "qmm" (and the host's choice: qmv_affine for T <= 4, qmm_affine above), against the float64
// reference; qmm_affine and qmm_affine_tensor give gemm_w32's bits on the dequantized weight.
// One real-width case (K 2048, 4 bits, group 64) besides.
func TestQuantMatMul(t *testing.T) {
	t0 := time.Now()
	ts := []int{1, 3, 17, 65}
	type shape struct {
		f    quantFormat
		N, K int
		ts   []int
	}
	var shapes []shape
	for _, f := range quantFormats() {
		shapes = append(shapes, shape{f, 37, 3 * f.group, ts})
	}
	shapes = append(shapes, shape{quantFormat{4, 64, op.BF16}, 72, 2048, []int{3, 17}})
	b := testBackend(t)
	worst := map[string]float64{}
	for si, s := range shapes {
		name := fmt.Sprintf("%v_N%d_K%d", s.f, s.N, s.K)
		w, dense := randQuant(t, uint64(10+si), s.N, s.K, s.f, 0.1)
		xs := make([][]float32, len(s.ts))
		for i, T := range s.ts {
			xs[i] = optest.Floats(uint64(1000+100*si+i), T*s.K, 1)
		}
		preferQMM(t, b, "")
		twin := matMuls(t, b, dense, s.ts, xs)
		for _, k := range quantKernels {
			preferQMM(t, b, k)
			b.ResetVariants()
			ys := matMuls(t, b, w, s.ts, xs)
			for i, T := range s.ts {
				what := fmt.Sprintf("%s T%d %s", name, T, kernelName(k))
				e := optest.RelErr(ys[i], optest.RefMatMul(xs[i], T, w))
				if !(e <= quantTol()) {
					t.Errorf("%s: relative error %.3g > %.3g", what, e, quantTol())
				}
				worst[kernelName(k)] = max(worst[kernelName(k)], e)
				if k == qmmKernel || k == qmmTensorKernel || (k == "" && T > qmvMaxRows) {
					checkBitwise(t, what+" vs gemm_w32 on the dequantized weight", ys[i], twin[i])
				}
			}
			want := []string{qmmKernel + "_" + quantTag(w.Q) + "_bm32_bn32_bk32"}
			switch k {
			case "":
				want = append(want, qmvKernel+"_"+quantTag(w.Q)+"_bm4_bn8_bk256")
				if s.ts[0] > qmvMaxRows {
					want = want[:1]
				}
			case qmvKernel:
				want = []string{qmvKernel + "_" + quantTag(w.Q) + "_bm4_bn8_bk256"}
			case qmmTensorKernel:
				want = []string{qmmTensorKernel + "_" + quantTag(w.Q) + "_bm32_bn32_bk32"}
			}
			if got := variantNames(b); !slices.Equal(got, want) {
				t.Errorf("%s with %s: variants %v, want %v", name, kernelName(k), got, want)
			}
		}
	}
	t.Logf("%d shapes x %d kernels on the emulator in %v; worst relative error per kernel %v (tolerance %.2g)",
		len(shapes), len(quantKernels), time.Since(t0).Round(time.Millisecond), worst, quantTol())
}

func kernelName(k string) string {
	if k == "" {
		return "default"
	}
	return k
}

// variantNames lists the variants that ran on b, sorted, without their counts.
func variantNames(b *Backend) []string {
	var out []string
	for _, v := range b.Variants() {
		out = append(out, v[:strings.LastIndex(v, " x")])
	}
	return out
}

// quantExpertsCase is one MoE layer: the gate_up and down formats (nil: BF16 dense), E experts
// of D, I with top-K routing.
type quantExpertsCase struct {
	gu, dn  *quantFormat
	E, D, I int
	K       int
}

func (c quantExpertsCase) String() string {
	f := func(q *quantFormat) string {
		if q == nil {
			return "BF16"
		}
		return q.String()
	}
	return fmt.Sprintf("gu_%s_dn_%s_E%d_D%d_I%d_K%d", f(c.gu), f(c.dn), c.E, c.D, c.I, c.K)
}

// quantExperts builds c's experts and their dense twin (QAffine matrices dequantized to F32,
// dense ones shared).
func quantExperts(t *testing.T, c quantExpertsCase, seed uint64) (ex, twin *op.Experts) {
	t.Helper()
	ex = &op.Experts{E: c.E, D: c.D, I: c.I}
	twin = &op.Experts{E: c.E, D: c.D, I: c.I}
	mk := func(f *quantFormat, s uint64, n, k int) (*op.Matrix, *op.Matrix) {
		if f == nil {
			m := randMatrix(t, s, n, k, op.BF16, 0.1)
			return m, m
		}
		return randQuant(t, s, n, k, *f, 0.1)
	}
	for e := 0; e < c.E; e++ {
		gu, gut := mk(c.gu, seed+uint64(2*e), 2*c.I, c.D)
		dn, dnt := mk(c.dn, seed+uint64(2*e+1), c.D, c.I)
		ex.GateUp, ex.Down = append(ex.GateUp, gu), append(ex.Down, dn)
		twin.GateUp, twin.Down = append(twin.GateUp, gut), append(twin.Down, dnt)
	}
	return ex, twin
}

// quantRoute is top-K routing of T tokens over E experts that leaves some experts without rows
// (only the first E-2 are routed) and some slots empty (idx -1, one in five).
func quantRoute(seed uint64, T, K, E int) []int32 {
	r := &rng{s: seed}
	idx := make([]int32, T*K)
	for t := 0; t < T; t++ {
		perm := make([]int32, E-2)
		for i := range perm {
			perm[i] = int32(i)
		}
		for i := len(perm) - 1; i > 0; i-- {
			j := int(r.next() % uint64(i+1))
			perm[i], perm[j] = perm[j], perm[i]
		}
		for j := 0; j < K; j++ {
			idx[t*K+j] = perm[j]
			if r.next()%5 == 0 {
				idx[t*K+j] = -1
			}
		}
	}
	return idx
}

// moeRun runs MoEExperts over host slices and returns ye and rk.
func moeRun(t *testing.T, b *Backend, x []float32, idx []int32, T, K int, ex *op.Experts) ([]float32, []int32) {
	t.Helper()
	ye, rk := make([]float32, T*K*ex.D), make([]int32, T*K)
	a := op.MoEExperts{YE: f32(ye), RK: i32(rk), X: f32(x), Idx: i32(idx), T: T, K: K, Ex: ex}
	exec(t, b, func(p op.Pass) error { return p.MoEExperts(a) }, &a)
	return ye, rk
}

// quantExpertsCases: both projections quantized (one format, two formats with straddling codes),
// quantized gate_up with a dense down, and 8 / 2 bits.
func quantExpertsCases() []quantExpertsCase {
	q := func(bits, g int, dt op.DType) *quantFormat { return &quantFormat{bits, g, dt} }
	return []quantExpertsCase{
		{gu: q(4, 64, op.BF16), dn: q(4, 64, op.BF16), E: 6, D: 128, I: 64, K: 3},
		{gu: q(3, 32, op.F16), dn: q(6, 32, op.BF16), E: 5, D: 96, I: 96, K: 2},
		{gu: q(5, 128, op.BF16), dn: nil, E: 5, D: 128, I: 40, K: 2},
		{gu: q(8, 32, op.F16), dn: q(2, 64, op.F16), E: 6, D: 64, I: 64, K: 3},
	}
}

// TestQuantExperts: the grouped expert path with quantized stacks at T = 1, 3 and 17 (experts
// without rows, empty slots) with each kernel of op "qmm" (and the host's choice), against the
// float64 reference; the slot rows exactly; qmm_affine_grouped and qmm_affine_tensor_grouped
// give the bits of gemm_w32_grouped on the dequantized experts.
func TestQuantExperts(t *testing.T) {
	b := testBackend(t)
	tol := optest.Tolerances()["MoEExperts.ye"] * OpTolScale
	worst := map[string]float64{}
	for ci, c := range quantExpertsCases() {
		ex, twin := quantExperts(t, c, uint64(100*ci))
		for _, T := range []int{1, 3, 17} {
			x := optest.Floats(uint64(500+10*ci+T), T*c.D, 1)
			idx := quantRoute(uint64(600+10*ci+T), T, c.K, c.E)
			wantYE, wantRK := optest.RefMoEExperts(x, T, c.K, idx, ex)
			used := 0
			for _, e := range idx {
				if e >= 0 {
					used++
				}
			}
			preferQMM(t, b, "")
			twinYE, _ := moeRun(t, b, x, idx, T, c.K, twin)
			for _, k := range quantKernels {
				what := fmt.Sprintf("%v T%d %s", c, T, kernelName(k))
				preferQMM(t, b, k)
				ye, rk := moeRun(t, b, x, idx, T, c.K, ex)
				if !slices.Equal(rk, wantRK) {
					t.Fatalf("%s: rk %v, want %v", what, rk, wantRK)
				}
				e := optest.RelErr(ye[:used*c.D], wantYE[:used*c.D])
				if !(e <= tol) {
					t.Errorf("%s: relative error %.3g > %.3g", what, e, tol)
				}
				worst[kernelName(k)] = max(worst[kernelName(k)], e)
				if k == qmmKernel || k == qmmTensorKernel || (k == "" && T > qmvMaxRows) {
					checkBitwise(t, what+" vs gemm_w32_grouped on the dequantized experts", ye[:used*c.D], twinYE[:used*c.D])
				}
			}
		}
	}
	t.Logf("worst relative error per kernel %v (tolerance %.2g)", worst, tol)
	for _, v := range []string{"qmm_affine_grouped_b4_g64_BF16_bm32_bn32_bk32", "qmv_affine_grouped_b3_g32_F16_bm4_bn8_bk256",
		"qmm_affine_tensor_grouped_b2_g64_F16_bm32_bn32_bk32", "gemm_w16_grouped_BF16_bm32_bn32_bk16"} {
		checkVariant(t, b, v)
	}
}

// TestQuantGather: Embed from a quantized table (every stream, the first and last rows) gives
// the dequantized rows bit for bit; PLEApply with a quantized n-gram table, key and value and
// GRRead with quantized down, up and inject weights agree with their float64 references.
func TestQuantGather(t *testing.T) {
	b := testBackend(t)
	const V, D, T, S = 50, 96, 5, 4
	f := quantFormat{3, 32, op.F16}
	table, dense := randQuant(t, 1, V, D, f, 1)
	tok := []int32{V - 1, 7, 0, 7, 23}
	H := make([]float32, T*S*D)
	a := op.Embed{H: f32(H), Tokens: i32(tok), T: T, S: S, Table: table}
	exec(t, b, func(p op.Pass) error { return p.Embed(a) }, &a)
	var want []float32
	for _, id := range tok {
		for range S {
			want = append(want, dense.F32[int(id)*D:int(id+1)*D]...)
		}
	}
	checkBitwise(t, "Embed from a quantized table", H, want)
	checkVariant(t, b, "qgather_affine_b3_g32_F16_rep4_tg96")

	const pT, pS, pD, heads, hd, rows = 6, 2, 32, 2, 64, 40
	fq := quantFormat{5, 64, op.BF16}
	r := &rng{s: 7}
	pw := &op.PLEWeights{S: pS, D: pD, EmbedDim: heads * hd, HeadDim: hd, Dilation: 3,
		NormKey: r.fill(pS*pD, -0.5, 0.5), NormQuery: r.fill(pS*pD, -0.5, 0.5), NormConv: r.fill(pS*pD, -0.5, 0.5),
		ConvW: r.fill(pS*pD*4, -0.5, 0.5)}
	pw.Table, _ = randQuant(t, 2, rows, hd, fq, 1)
	pw.Key, _ = randQuant(t, 3, pS*pD, pw.EmbedDim, quantFormat{4, 128, op.F16}, 0.2)
	pw.Value, _ = randQuant(t, 4, pD, pw.EmbedDim, quantFormat{8, 64, op.BF16}, 0.2)
	ids := make([]int32, pT*heads)
	for i := range ids {
		ids[i] = int32(r.next() % rows)
	}
	ids[0], ids[1] = rows-1, 0
	pH, st0 := r.fill(pT*pS*pD, -2, 2), r.fill(pw.ConvStateLen(), -1, 1)
	h, st := slices.Clone(pH), slices.Clone(st0)
	pa := op.PLEApply{H: f32(h), T: pT, IDs: i32(ids), W: pw, ConvState: f32(st), Eps: 1e-6}
	exec(t, b, func(p op.Pass) error { return p.PLEApply(pa) }, &pa)
	wantH, wantSt := optest.RefPLEApply(pH, pT, ids, pw, st0, 1e-6)
	checkClose64(t, "PLEApply.H quantized", h, wantH, optest.Tolerances()["PLEApply.H"]*OpTolScale)
	checkClose64(t, "PLEApply.convState quantized", st, wantSt, optest.Tolerances()["PLEApply.convState"]*OpTolScale)
	checkVariant(t, b, "qgather_affine_b5_g64_BF16_rep1_tg64")

	g := &op.GRWeights{S: 2, D: 64, R: 32, Norm: r.fill(128, -0.5, 0.5)}
	g.Down, _ = randQuant(t, 5, 32, 128, quantFormat{6, 64, op.F16}, 0.05)
	g.Up, _ = randQuant(t, 6, 128, 32, quantFormat{2, 32, op.BF16}, 0.2)
	g.Inj, _ = randQuant(t, 7, 2, 128, quantFormat{8, 128, op.BF16}, 0.05)
	gH := r.fill(5*128, -2, 2)
	x, beta := make([]float32, 5*64), make([]float32, 5*2)
	gr := op.GRRead{X: f32(x), Beta: f32(beta), H: f32(gH), T: 5, G: g, Eps: 1e-6}
	exec(t, b, func(p op.Pass) error { return p.GRRead(gr) }, &gr)
	wx, wb := optest.RefGRRead(gH, false, 5, g, 1e-6)
	checkClose64(t, "GRRead.x quantized", x, wx, optest.Tolerances()["GRRead.x"]*OpTolScale)
	checkClose64(t, "GRRead.beta quantized", beta, wb, optest.Tolerances()["GRRead.beta"]*OpTolScale)
}

// quantStatic is the static threadgroup memory of each quantized kernel (bytes): qmm_affine
// and qmm_affine_tensor stage a 32 x 32 float tile of x and one of W (8 KiB: 4 threadgroups per
// 32 KiB core), the output tile reusing the x tile; qmv_affine and qgather_affine use none.
var quantStatic = map[string]int{
	"qmm_affine": 8192, "qmm_affine_grouped": 8192, "qmm_affine_tensor": 8192, "qmm_affine_tensor_grouped": 8192,
	"qmv_affine": 0, "qmv_affine_grouped": 0, "qgather_affine": 0,
}

// TestQuantSchedules: every quantized kernel (qmm_affine, qmv_affine, qmm_affine_tensor, their
// grouped forms, qgather_affine) under the reversed and shuffled lane schedules (the shuffled
// run also draws another cooperative-tensor layout) and in the AddressSanitizer build (every
// buffer, codes, scales and biases apart, at its exact length) gives the forward schedule's
// bits; the static threadgroup memory of each kernel is quantStatic's.
func TestQuantSchedules(t *testing.T) {
	f := quantFormat{3, 64, op.F16}
	w, _ := randQuant(t, 31, 37, 192, f, 0.1)
	c := quantExpertsCases()[1]
	ex, _ := quantExperts(t, c, 77)
	table, _ := randQuant(t, 32, 20, 64, quantFormat{6, 32, op.BF16}, 1)
	x17, x3 := optest.Floats(33, 17*192, 1), optest.Floats(34, 3*192, 1)
	mx17, mx3 := optest.Floats(35, 17*c.D, 1), optest.Floats(36, 3*c.D, 1)
	idx17, idx3 := quantRoute(37, 17, c.K, c.E), quantRoute(38, 3, c.K, c.E)
	tok := []int32{19, 0, 5}
	devs := compareSchedules(t, append(schedules, emu.Options{Threads: 2, ASan: true}), noPrefer, func(b *Backend) [][]float32 {
		var out [][]float32
		for _, k := range []string{qmmKernel, qmmTensorKernel} {
			preferQMM(t, b, k)
			out = append(out, matMuls(t, b, w, []int{17}, [][]float32{x17})...)
			ye, _ := moeRun(t, b, mx17, idx17, 17, c.K, ex)
			out = append(out, ye)
		}
		preferQMM(t, b, "")
		out = append(out, matMuls(t, b, w, []int{3}, [][]float32{x3})...)
		ye, _ := moeRun(t, b, mx3, idx3, 3, c.K, ex)
		H := make([]float32, len(tok)*2*64)
		a := op.Embed{H: f32(H), Tokens: i32(tok), T: len(tok), S: 2, Table: table}
		exec(t, b, func(p op.Pass) error { return p.Embed(a) }, &a)
		return append(out, ye, H)
	})
	for _, dev := range devs {
		seen := map[string]bool{}
		for _, st := range dev.Stats() {
			want, ok := quantStatic[st.Kernel]
			if !ok {
				continue
			}
			seen[st.Kernel] = true
			if st.StaticThreadgroupMemory != want {
				t.Errorf("%s: %d B of static threadgroup memory, want %d", st.Kernel, st.StaticThreadgroupMemory, want)
			}
		}
		if len(seen) != len(quantStatic) {
			t.Errorf("%s: kernels with stats %v, want all of %v", dev.Name(), seen, quantStatic)
		}
	}
}

// TestQuantUpload: quantized weights stay packed on the device (the store's bytes are their
// codes, scales and biases, uploaded once however many passes read them), the experts stacked
// per projection; experts whose formats differ within a projection are refused with
// ErrUnsupported naming both formats, and a malformed quantized weight with ErrShape, before
// any work; the kernel report names the variants.
func TestQuantUpload(t *testing.T) {
	b := testBackend(t)
	w, _ := randQuant(t, 41, 40, 128, quantFormat{4, 64, op.BF16}, 0.1)
	c := quantExpertsCases()[1]
	ex, _ := quantExperts(t, c, 42)
	x := optest.Floats(43, 2*128, 1)
	mx := optest.Floats(44, 2*c.D, 1)
	idx := quantRoute(45, 2, c.K, c.E)
	ws, sc := b.NewWeights(op.WeightOptions{}), b.NewScratch()
	defer ws.Release()
	defer sc.Release()
	pass := func(run func(op.Pass) error) error {
		p, err := b.Begin(ws, sc)
		if err != nil {
			return err
		}
		if err := run(p); err != nil {
			p.Abandon()
			return err
		}
		_, err = p.Commit()
		return err
	}
	tensor := func(n int) op.Tensor {
		tn, err := b.NewTensor(op.F32, n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(tn) })
		return tn
	}
	X, Y := tensor(len(x)), tensor(2*40)
	copy(X.F32(), x)
	MX, YE := tensor(len(mx)), tensor(2*c.K*c.D)
	copy(MX.F32(), mx)
	RK, err := b.NewTensor(op.I32, len(idx))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(RK)
	IDX, err := b.NewTensor(op.I32, len(idx))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(IDX)
	copy(IDX.I32(), idx)
	want := w.Bytes()
	for e := 0; e < c.E; e++ {
		want += ex.GateUp[e].Bytes() + ex.Down[e].Bytes()
	}
	for i := 0; i < 2; i++ {
		if err := pass(func(p op.Pass) error {
			return firstError(p.MatMul(op.MatMul{Y: Y, X: X, T: 2, W: w}),
				p.MoEExperts(op.MoEExperts{YE: YE, RK: RK, X: MX, Idx: IDX, T: 2, K: c.K, Ex: ex}))
		}); err != nil {
			t.Fatal(err)
		}
		if got := ws.Bytes(); got != want {
			t.Fatalf("pass %d: %d weight bytes on the device, want the packed %d", i, got, want)
		}
	}
	t.Logf("resident weight bytes %d (packed); the dequantized float32 weights would take %d", want, 4*(40*128+c.E*3*c.D*c.I))

	mixed := *ex
	mixed.Down = slices.Clone(ex.Down)
	mixed.Down[2], _ = randQuant(t, 46, c.D, c.I, quantFormat{5, 32, op.BF16}, 0.1)
	err = pass(func(p op.Pass) error {
		return p.MoEExperts(op.MoEExperts{YE: YE, RK: RK, X: MX, Idx: IDX, T: 2, K: c.K, Ex: &mixed})
	})
	if !errors.Is(err, op.ErrUnsupported) || !strings.Contains(err.Error(), "QAffine b5 g32 BF16") ||
		!strings.Contains(err.Error(), "QAffine b6 g32 BF16") {
		t.Errorf("experts of two formats: %v", err)
	}
	bad := *w
	bad.Q = &op.Quant{Bits: 4, Group: 64, ScaleDType: op.BF16, Codes: w.Q.Codes[:len(w.Q.Codes)-1], Scales: w.Q.Scales, Biases: w.Q.Biases}
	y0 := slices.Clone(Y.F32())
	err = pass(func(p op.Pass) error { return p.MatMul(op.MatMul{Y: Y, X: X, T: 2, W: &bad}) })
	if !errors.Is(err, op.ErrShape) || !slices.Equal(Y.F32(), y0) {
		t.Errorf("short codes: %v (y changed: %v)", err, !slices.Equal(Y.F32(), y0))
	}
	rep := b.Kernels()
	for _, v := range []string{"qmv_affine_b4_g64_BF16_bm4_bn8_bk256 x2", "qmv_affine_grouped_b3_g32_F16_bm4_bn8_bk256 x2",
		"qmv_affine_grouped_b6_g32_BF16_bm4_bn8_bk256 x2"} {
		if !strings.Contains(rep, v) {
			t.Errorf("kernel report lacks %q: %s", v, rep)
		}
	}
	t.Log(rep)
}
