package metal

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stratakernels/strata/emu"
	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// The float-format kernels (fpquant.metal, fpquant_tensor.metal) on the emulator: every kernel of
// op "qmm_fp" and its grouped form against the float64 references (optest.DequantFP8 /
// DequantQFloat), for every format, at T = 1, 3, 17, 65 with N and K that are not multiples of
// the tiles (FP8 K = 200 and 129: a ragged 128-block, K not a multiple of 8); qmm_fp and
// qmm_fp_tensor bitwise equal to gemm_w32 on the decoded float32 weight; the gathers of Embed and
// PLE bitwise equal to the decoded rows; schedules, ASan and threadgroup memory; uploads.

// fpCase is one float format of the tests with a K of its own.
type fpCase struct {
	q optest.Quant
	K int
}

func (c fpCase) String() string { return c.q.Name() }

// fpCases: FP8Block with BF16 scales (K 200) and F32 scales (K 129), mxfp4 and mxfp8 (K 96:
// three groups), nvfp4 (K 48).
var fpTestCases = []fpCase{
	{optest.Quant{FP8: true, ScaleDType: op.BF16}, 200}, {optest.Quant{FP8: true, ScaleDType: op.F32}, 129},
	{optest.Quant{Mode: op.MXFP4}, 96}, {optest.Quant{Mode: op.NVFP4}, 48}, {optest.Quant{Mode: op.MXFP8}, 96},
}

// randFP returns a float-format weight [n, k] of q and its dense twin (the decoded values as an
// F32 matrix: what gemm_w32 must agree with bitwise).
func randFP(t *testing.T, q optest.Quant, seed uint64, n, k int, scale float32) (m, dense *op.Matrix) {
	t.Helper()
	var w []float32
	var err error
	if q.FP8 {
		m, w, err = optest.RandFP8Block(seed, n, k, q.ScaleDType, scale)
	} else {
		m, w, err = optest.RandQFloat(seed, n, k, q.Mode, scale)
	}
	if err != nil {
		t.Fatal(err)
	}
	if dense, err = op.NewMatrixF32(n, k, w); err != nil {
		t.Fatal(err)
	}
	return m, dense
}

// fpKernels are the kernels of op "qmm_fp"; "" is the host's choice from the shapes.
var fpKernels = []string{"", qmmFPKernel, qmvFPKernel, qmmFPTensorKernel}

func preferFP(t *testing.T, b *Backend, kernel string) {
	t.Helper()
	if err := b.Prefer("qmm_fp", kernel); err != nil {
		t.Fatal(err)
	}
}

// TestFPMatMul: for every format, W [37, K] at T = 1, 3, 17 and 65 with each kernel of op
// "qmm_fp" (and the host's choice: qmv_fp for T <= 4, qmm_fp above), against the float64
// reference; qmm_fp and qmm_fp_tensor give gemm_w32's bits on the decoded weight. Real-width
// cases (FP8 K 2560 with ragged N 200, mxfp4 K 2048) besides.
func TestFPMatMul(t *testing.T) {
	type shape struct {
		q    optest.Quant
		N, K int
		ts   []int
	}
	var shapes []shape
	for _, c := range fpTestCases {
		shapes = append(shapes, shape{c.q, 37, c.K, []int{1, 3, 17, 65}})
	}
	shapes = append(shapes, shape{fpTestCases[0].q, 200, 2560, []int{3, 17}}, shape{fpTestCases[2].q, 72, 2048, []int{3, 17}})
	b := testBackend(t)
	worst := map[string]float64{}
	for si, s := range shapes {
		name := fmt.Sprintf("%s_N%d_K%d", s.q.Name(), s.N, s.K)
		w, dense := randFP(t, s.q, uint64(10+si), s.N, s.K, 0.1)
		xs := make([][]float32, len(s.ts))
		for i, T := range s.ts {
			xs[i] = optest.Floats(uint64(1000+100*si+i), T*s.K, 1)
		}
		twin := matMuls(t, b, dense, s.ts, xs)
		for _, k := range fpKernels {
			preferFP(t, b, k)
			b.ResetVariants()
			ys := matMuls(t, b, w, s.ts, xs)
			for i, T := range s.ts {
				what := fmt.Sprintf("%s T%d %s", name, T, kernelName(k))
				e := optest.RelErr(ys[i], optest.RefMatMul(xs[i], T, w))
				if !(e <= quantTol()) {
					t.Errorf("%s: relative error %.3g > %.3g", what, e, quantTol())
				}
				worst[kernelName(k)] = max(worst[kernelName(k)], e)
				if k == qmmFPKernel || k == qmmFPTensorKernel || (k == "" && T > qmvMaxRows) {
					checkBitwise(t, what+" vs gemm_w32 on the decoded weight", ys[i], twin[i])
				}
			}
			tag := fpTag(w)
			want := []string{qmmFPKernel + "_" + tag + "_bm32_bn32_bk32"}
			switch k {
			case "":
				if s.ts[0] <= qmvMaxRows {
					want = append(want, qmvFPKernel+"_"+tag+"_bm4_bn8_bk256")
				}
			case qmvFPKernel:
				want = []string{qmvFPKernel + "_" + tag + "_bm4_bn8_bk256"}
			case qmmFPTensorKernel:
				want = []string{qmmFPTensorKernel + "_" + tag + "_bm32_bn32_bk32"}
			}
			if got := variantNames(b); !slices.Equal(got, want) {
				t.Errorf("%s with %s: variants %v, want %v", name, kernelName(k), got, want)
			}
		}
	}
	t.Logf("worst relative error per kernel %v (tolerance %.2g)", worst, quantTol())
}

// fpExpertsCase is one MoE layer: the gate (or gate_up), up (split only) and down formats (a
// zero Quant: BF16 dense), E experts of D, I with top-K routing.
type fpExpertsCase struct {
	gu, up, dn optest.Quant
	split      bool
	E, D, I, K int
}

func (c fpExpertsCase) String() string {
	return fmt.Sprintf("gu_%s_up_%s_dn_%s_split%v_E%d_D%d_I%d_K%d", c.gu.Name(), c.up.Name(), c.dn.Name(), c.split, c.E, c.D, c.I, c.K)
}

// fpExperts builds c's experts and their dense twin (decoded to F32; dense ones shared).
func fpExperts(t *testing.T, c fpExpertsCase, seed uint64) (ex, twin *op.Experts) {
	t.Helper()
	ex = &op.Experts{E: c.E, D: c.D, I: c.I}
	twin = &op.Experts{E: c.E, D: c.D, I: c.I}
	mk := func(q optest.Quant, s uint64, n, k int) (*op.Matrix, *op.Matrix) {
		if !q.FP8 && q.Mode == 0 {
			m := randMatrix(t, s, n, k, op.BF16, 0.1)
			return m, m
		}
		return randFP(t, q, s, n, k, 0.1)
	}
	gateRows := 2 * c.I
	if c.split {
		gateRows = c.I
	}
	for e := 0; e < c.E; e++ {
		gu, gut := mk(c.gu, seed+uint64(3*e), gateRows, c.D)
		dn, dnt := mk(c.dn, seed+uint64(3*e+2), c.D, c.I)
		ex.GateUp, ex.Down = append(ex.GateUp, gu), append(ex.Down, dn)
		twin.GateUp, twin.Down = append(twin.GateUp, gut), append(twin.Down, dnt)
		if c.split {
			up, upt := mk(c.up, seed+uint64(3*e+1), c.I, c.D)
			ex.Up, twin.Up = append(ex.Up, up), append(twin.Up, upt)
		}
	}
	return ex, twin
}

var (
	fp8B = optest.Quant{FP8: true, ScaleDType: op.BF16}
	fp8F = optest.Quant{FP8: true, ScaleDType: op.F32}
)

// fpExpertsCases: FP8 experts with ragged D and I (fused, and split: two grouped GEMMs), a split
// layer of one MLX mode, a dense down, and gate, up and down in three formats.
func fpExpertsCases() []fpExpertsCase {
	return []fpExpertsCase{
		{gu: fp8B, dn: fp8B, E: 6, D: 200, I: 72, K: 3},
		{gu: fp8F, up: fp8F, dn: fp8F, split: true, E: 5, D: 136, I: 40, K: 2},
		{gu: optest.Quant{Mode: op.MXFP4}, up: optest.Quant{Mode: op.MXFP4}, dn: optest.Quant{Mode: op.MXFP8}, split: true, E: 5, D: 96, I: 64, K: 2},
		{gu: optest.Quant{Mode: op.NVFP4}, E: 6, D: 64, I: 48, K: 3},
		{gu: optest.Quant{Mode: op.NVFP4}, up: fp8B, dn: optest.Quant{Mode: op.MXFP4}, split: true, E: 5, D: 128, I: 64, K: 2},
	}
}

// TestFPExperts: the grouped expert path with float-format stacks at T = 1, 3 and 17 (experts
// without rows, empty slots) with each kernel of op "qmm_fp" (and the host's choice), against
// the float64 reference; the slot rows exactly; qmm_fp_grouped and qmm_fp_tensor_grouped give
// the bits of gemm_w32_grouped on the decoded experts.
func TestFPExperts(t *testing.T) {
	b := testBackend(t)
	tol := optest.Tolerances()["MoEExperts.ye"] * OpTolScale
	worst := map[string]float64{}
	for ci, c := range fpExpertsCases() {
		ex, twin := fpExperts(t, c, uint64(100*ci))
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
			twinYE, _ := moeRun(t, b, x, idx, T, c.K, twin)
			for _, k := range fpKernels {
				what := fmt.Sprintf("%v T%d %s", c, T, kernelName(k))
				preferFP(t, b, k)
				ye, rk := moeRun(t, b, x, idx, T, c.K, ex)
				if !slices.Equal(rk, wantRK) {
					t.Fatalf("%s: rk %v, want %v", what, rk, wantRK)
				}
				e := optest.RelErr(ye[:used*c.D], wantYE[:used*c.D])
				if !(e <= tol) {
					t.Errorf("%s: relative error %.3g > %.3g", what, e, tol)
				}
				worst[kernelName(k)] = max(worst[kernelName(k)], e)
				if k == qmmFPKernel || k == qmmFPTensorKernel || (k == "" && T > qmvMaxRows) {
					checkBitwise(t, what+" vs gemm_w32_grouped on the decoded experts", ye[:used*c.D], twinYE[:used*c.D])
				}
			}
		}
	}
	t.Logf("worst relative error per kernel %v (tolerance %.2g)", worst, tol)
	for _, v := range []string{"qmm_fp_grouped_fp8_BF16_bm32_bn32_bk32", "qmv_fp_grouped_fp8_F32_bm4_bn8_bk256",
		"qmm_fp_tensor_grouped_mxfp8_bm32_bn32_bk32", "qmv_fp_grouped_nvfp4_bm4_bn8_bk256", "gemm_w16_grouped_BF16_bm32_bn32_bk16"} {
		checkVariant(t, b, v)
	}
}

// TestFPGather: Embed from a table of every format (every stream, the first and last rows) gives
// the decoded rows bit for bit; PLEApply with an FP8 n-gram table (a ragged block column), key
// and value agrees with its float64 reference.
func TestFPGather(t *testing.T) {
	b := testBackend(t)
	const V, T, S = 150, 5, 3
	tok := []int32{V - 1, 7, 0, 7, 129}
	for _, c := range fpTestCases {
		table, dense := randFP(t, c.q, 1, V, c.K, 1)
		H := make([]float32, T*S*c.K)
		a := op.Embed{H: f32(H), Tokens: i32(tok), T: T, S: S, Table: table}
		exec(t, b, func(p op.Pass) error { return p.Embed(a) }, &a)
		var want []float32
		for _, id := range tok {
			for range S {
				want = append(want, dense.F32[int(id)*c.K:int(id+1)*c.K]...)
			}
		}
		checkBitwise(t, "Embed from a "+c.String()+" table", H, want)
		checkVariant(t, b, fmt.Sprintf("qgather_fp_%s_rep%d_tg%d", fpTag(table), S, elemThreads(c.K)))
	}

	const pT, pS, pD, heads, hd, rows = 6, 2, 32, 2, 64, 140
	r := &rng{s: 7}
	pw := &op.PLEWeights{S: pS, D: pD, EmbedDim: heads * hd, HeadDim: hd, Dilation: 3,
		NormKey: r.fill(pS*pD, -0.5, 0.5), NormQuery: r.fill(pS*pD, -0.5, 0.5), NormConv: r.fill(pS*pD, -0.5, 0.5),
		ConvW: r.fill(pS*pD*4, -0.5, 0.5)}
	pw.Table, _ = randFP(t, fp8F, 2, rows, hd, 1)
	pw.Key, _ = randFP(t, optest.Quant{Mode: op.NVFP4}, 3, pS*pD, pw.EmbedDim, 0.2)
	pw.Value, _ = randFP(t, fp8B, 4, pD, pw.EmbedDim, 0.2)
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
	checkClose64(t, "PLEApply.H float formats", h, wantH, optest.Tolerances()["PLEApply.H"]*OpTolScale)
	checkClose64(t, "PLEApply.convState float formats", st, wantSt, optest.Tolerances()["PLEApply.convState"]*OpTolScale)
	checkVariant(t, b, "qgather_fp_fp8_F32_rep1_tg64")
}

// fpStatic is the static threadgroup memory of each float-format kernel (bytes): qmm_fp's tiles
// are qmm_affine's (8 KiB); qmv_fp and qgather_fp use none.
var fpStatic = map[string]int{
	"qmm_fp": 8192, "qmm_fp_grouped": 8192, "qmm_fp_tensor": 8192, "qmm_fp_tensor_grouped": 8192,
	"qmv_fp": 0, "qmv_fp_grouped": 0, "qgather_fp": 0,
}

// TestFPSchedules: every float-format kernel under the reversed and shuffled lane schedules and
// in the AddressSanitizer build (codes and scales apart, each at its exact length: an FP8 weight
// of an odd byte count, the last row's ragged block) gives the forward schedule's bits; the
// static threadgroup memory of each kernel is fpStatic's.
func TestFPSchedules(t *testing.T) {
	w, _ := randFP(t, fp8F, 31, 37, 129, 0.1)
	nv, _ := randFP(t, optest.Quant{Mode: op.NVFP4}, 32, 37, 80, 0.1)
	c := fpExpertsCases()[0]
	ex, _ := fpExperts(t, c, 77)
	table, _ := randFP(t, fp8B, 33, 21, 77, 1)
	x17, x3 := optest.Floats(34, 17*129, 1), optest.Floats(35, 3*129, 1)
	nx := optest.Floats(36, 17*80, 1)
	mx17, mx3 := optest.Floats(37, 17*c.D, 1), optest.Floats(38, 3*c.D, 1)
	idx17, idx3 := quantRoute(39, 17, c.K, c.E), quantRoute(40, 3, c.K, c.E)
	tok := []int32{20, 0, 5}
	devs := compareSchedules(t, append(schedules, emu.Options{Threads: 2, ASan: true}), noPrefer, func(b *Backend) [][]float32 {
		var out [][]float32
		for _, k := range []string{qmmFPKernel, qmmFPTensorKernel} {
			preferFP(t, b, k)
			out = append(out, matMuls(t, b, w, []int{17}, [][]float32{x17})...)
			out = append(out, matMuls(t, b, nv, []int{17}, [][]float32{nx})...)
			ye, _ := moeRun(t, b, mx17, idx17, 17, c.K, ex)
			out = append(out, ye)
		}
		preferFP(t, b, "")
		out = append(out, matMuls(t, b, w, []int{3}, [][]float32{x3})...)
		ye, _ := moeRun(t, b, mx3, idx3, 3, c.K, ex)
		H := make([]float32, len(tok)*2*77)
		a := op.Embed{H: f32(H), Tokens: i32(tok), T: len(tok), S: 2, Table: table}
		exec(t, b, func(p op.Pass) error { return p.Embed(a) }, &a)
		return append(out, ye, H)
	})
	for _, dev := range devs {
		seen := map[string]bool{}
		for _, st := range dev.Stats() {
			want, ok := fpStatic[st.Kernel]
			if !ok {
				continue
			}
			seen[st.Kernel] = true
			if st.StaticThreadgroupMemory != want {
				t.Errorf("%s: %d B of static threadgroup memory, want %d", st.Kernel, st.StaticThreadgroupMemory, want)
			}
		}
		if len(seen) != len(fpStatic) {
			t.Errorf("%s: kernels with stats %v, want all of %v", dev.Name(), seen, fpStatic)
		}
	}
}

// TestFPUpload: float-format weights stay packed on the device (the store's bytes are their
// codes and scales, Matrix.Bytes, uploaded once however many passes read them), the experts
// stacked per projection; experts whose formats differ within a projection are refused with
// ErrUnsupported naming both formats, and a malformed weight with ErrShape, before any work.
func TestFPUpload(t *testing.T) {
	b := testBackend(t)
	w, _ := randFP(t, fp8B, 41, 40, 200, 0.1)
	c := fpExpertsCases()[2]
	ex, _ := fpExperts(t, c, 42)
	x := optest.Floats(43, 2*200, 1)
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
	tensor := func(dt op.DType, n int) op.Tensor {
		tn, err := b.NewTensor(dt, n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(tn) })
		return tn
	}
	X, Y := tensor(op.F32, len(x)), tensor(op.F32, 2*40)
	copy(X.F32(), x)
	MX, YE := tensor(op.F32, len(mx)), tensor(op.F32, 2*c.K*c.D)
	copy(MX.F32(), mx)
	RK, IDX := tensor(op.I32, len(idx)), tensor(op.I32, len(idx))
	copy(IDX.I32(), idx)
	want := w.Bytes()
	for e := 0; e < c.E; e++ {
		want += ex.GateUp[e].Bytes() + ex.Up[e].Bytes() + ex.Down[e].Bytes()
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
	t.Logf("resident weight bytes %d (packed); the decoded float32 weights would take %d", want, 4*(40*200+c.E*3*c.D*c.I))

	mixed := *ex
	mixed.Down = slices.Clone(ex.Down)
	mixed.Down[2], _ = randFP(t, optest.Quant{Mode: op.NVFP4}, 46, c.D, c.I, 0.1)
	err := pass(func(p op.Pass) error {
		return p.MoEExperts(op.MoEExperts{YE: YE, RK: RK, X: MX, Idx: IDX, T: 2, K: c.K, Ex: &mixed})
	})
	if !errors.Is(err, op.ErrUnsupported) || !strings.Contains(err.Error(), "QFloat nvfp4") || !strings.Contains(err.Error(), "QFloat mxfp8") {
		t.Errorf("experts of two formats: %v", err)
	}
	bad := *w
	f := *w.FP8
	f.Codes = f.Codes[:len(f.Codes)-1]
	bad.FP8 = &f
	y0 := slices.Clone(Y.F32())
	err = pass(func(p op.Pass) error { return p.MatMul(op.MatMul{Y: Y, X: X, T: 2, W: &bad}) })
	if !errors.Is(err, op.ErrShape) || !slices.Equal(Y.F32(), y0) {
		t.Errorf("short codes: %v (y changed: %v)", err, !slices.Equal(Y.F32(), y0))
	}
}

// TestPLESplitFP8TableRefused: a PLE table of FP8Block parts (their rows share scales in 128-row
// blocks, which the Pass's table of gathered rows cannot keep) is refused with ErrUnsupported
// before anything runs; the CPU backend takes it (op/optest's parts cases).
func TestPLESplitFP8TableRefused(t *testing.T) {
	b := testBackend(t)
	table, _, err := optest.RandFP8Block(1, 256, 32, op.BF16, 1)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := optest.TableParts(table, 128)
	if err != nil {
		t.Fatal(err)
	}
	const S, D, E = 2, 8, 64
	key, _, _ := optest.RandMatrix(2, S*D, E, op.F32, 0.2)
	value, _, _ := optest.RandMatrix(3, D, E, op.F32, 0.2)
	w := &op.PLEWeights{S: S, D: D, EmbedDim: E, HeadDim: 32, Key: key, Value: value, Dilation: 3,
		NormKey: make([]float32, S*D), NormQuery: make([]float32, S*D), NormConv: make([]float32, S*D), ConvW: make([]float32, S*D*4)}
	a := op.PLEApply{H: f32(make([]float32, S*D)), T: 1, IDs: i32([]int32{255, 0}), W: w, Parts: parts, PartRows: 128,
		ConvState: f32(make([]float32, w.ConvStateLen())), Eps: 1e-6}
	if _, err := op.Exec(b, func(p op.Pass) error { return p.PLEApply(a) }, &a); !errors.Is(err, op.ErrUnsupported) {
		t.Fatalf("got %v, want an error wrapping ErrUnsupported", err)
	}
}
