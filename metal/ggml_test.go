package metal

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stratakernels/strata/emu"
	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// The ggml block types' kernels (ggml.metal, ggml_tensor.metal) on the emulator: every kernel of
// op "qmm_gg" and its grouped form, for every type of op.GGMLBlockTypes, against the float64
// references (optest.DequantGGML); qmm_gg and qmm_gg_tensor bitwise equal to gemm_w32 on the
// decoded float32 weight; the gathers of Embed and PLE bitwise equal to the decoded rows;
// schedules, ASan and threadgroup memory; uploads. The op cases of op/optest (names
// "Op/ggml_<type>/...") run in TestOpCases and, per kernel, TestOpCasesVariants.

// randGG is optest.RandGGML with the weight's dense twin: the decoded values (optest.DequantGGML:
// each exact value rounded once to float32, ggml's values) as an F32 matrix (what gemm_w32 must
// agree with bitwise).
func randGG(t *testing.T, typ op.GGMLType, seed uint64, n, k int) (m, dense *op.Matrix) {
	t.Helper()
	m, w, err := optest.RandGGML(seed, n, k, typ, 1)
	if err != nil {
		t.Fatal(err)
	}
	if dense, err = op.NewMatrixF32(n, k, w); err != nil {
		t.Fatal(err)
	}
	return m, dense
}

// ggKernels are the kernels of op "qmm_gg"; "" is the host's choice from the shapes.
var ggKernels = []string{"", qmmGGKernel, qmvGGKernel, qmmGGTensorKernel}

func preferGG(t *testing.T, b *Backend, kernel string) {
	t.Helper()
	if err := b.Prefer("qmm_gg", kernel); err != nil {
		t.Fatal(err)
	}
}

// ggK is the K of each type's tests: three blocks of 32, or two of 256.
func ggK(typ op.GGMLType) int {
	if typ.BlockSize() == 256 {
		return 512
	}
	return 96
}

// TestGGMatMul: for every type, W [37, K] (not a multiple of the tiles) at T = 1, 3 and 17 with
// each kernel of op "qmm_gg" (and the host's choice: qmv_gg for T <= 4, qmm_gg above), against
// the float64 reference; qmm_gg and qmm_gg_tensor give gemm_w32's bits on the decoded weight,
// and the default kernels ran under their variant names.
func TestGGMatMul(t *testing.T) {
	b := testBackend(t)
	ts := []int{1, 3, 17}
	worst := map[string]float64{}
	for ti, typ := range op.GGMLBlockTypes {
		N, K := 37, ggK(typ)
		name := fmt.Sprintf("%v_N%d_K%d", typ, N, K)
		w, dense := randGG(t, typ, uint64(10+ti), N, K)
		xs := make([][]float32, len(ts))
		for i, T := range ts {
			xs[i] = optest.Floats(uint64(1000+100*ti+i), T*K, 1)
		}
		twin := matMuls(t, b, dense, ts, xs)
		for _, k := range ggKernels {
			preferGG(t, b, k)
			b.ResetVariants()
			ys := matMuls(t, b, w, ts, xs)
			for i, T := range ts {
				what := fmt.Sprintf("%s T%d %s", name, T, kernelName(k))
				e := optest.RelErr(ys[i], optest.RefMatMul(xs[i], T, w))
				if !(e <= quantTol()) {
					t.Errorf("%s: relative error %.3g > %.3g", what, e, quantTol())
				}
				worst[kernelName(k)] = max(worst[kernelName(k)], e)
				if k == qmmGGKernel || k == qmmGGTensorKernel || (k == "" && T > qmvMaxRows) {
					checkBitwise(t, what+" vs gemm_w32 on the decoded weight", ys[i], twin[i])
				}
			}
			tag := ggTag(w)
			want := []string{qmmGGKernel + "_" + tag + "_bm32_bn32_bk32", qmvGGKernel + "_" + tag + "_bm4_bn8_bk256"}
			switch k {
			case qmmGGKernel:
				want = want[:1]
			case qmvGGKernel:
				want = want[1:]
			case qmmGGTensorKernel:
				want = []string{qmmGGTensorKernel + "_" + tag + "_bm32_bn32_bk32"}
			}
			if got := variantNames(b); !slices.Equal(got, want) {
				t.Errorf("%s with %s: variants %v, want %v", name, kernelName(k), got, want)
			}
		}
	}
	t.Logf("worst relative error per kernel %v (tolerance %.2g)", worst, quantTol())
}

// ggExpertsCase is one MoE layer of GGML experts: the gate (or gate_up), up (split only) and down
// types, E experts of D, I with top-K routing.
type ggExpertsCase struct {
	gu, up, dn op.GGMLType
	split      bool
	E, D, I, K int
}

func (c ggExpertsCase) String() string {
	return fmt.Sprintf("gu_%v_up_%v_dn_%v_split%v_E%d_D%d_I%d_K%d", c.gu, c.up, c.dn, c.split, c.E, c.D, c.I, c.K)
}

// ggExperts builds c's experts and their dense twin (decoded to F32).
func ggExperts(t *testing.T, c ggExpertsCase, seed uint64) (ex, twin *op.Experts) {
	t.Helper()
	ex = &op.Experts{E: c.E, D: c.D, I: c.I}
	twin = &op.Experts{E: c.E, D: c.D, I: c.I}
	gateRows := 2 * c.I
	if c.split {
		gateRows = c.I
	}
	for e := 0; e < c.E; e++ {
		gu, gut := randGG(t, c.gu, seed+uint64(3*e), gateRows, c.D)
		dn, dnt := randGG(t, c.dn, seed+uint64(3*e+2), c.D, c.I)
		ex.GateUp, ex.Down = append(ex.GateUp, gu), append(ex.Down, dn)
		twin.GateUp, twin.Down = append(twin.GateUp, gut), append(twin.Down, dnt)
		if c.split {
			up, upt := randGG(t, c.up, seed+uint64(3*e+1), c.I, c.D)
			ex.Up, twin.Up = append(ex.Up, up), append(twin.Up, upt)
		}
	}
	return ex, twin
}

// ggExpertsCases: a Q4_K_M-like layer (gate and up apart in one type, stacked as gate_up; a
// Q6_K down), a fused gate_up in Q8_0 over an MXFP4 down, and gate and up apart in two types
// (two grouped GEMMs) over an IQ4_XS down.
func ggExpertsCases() []ggExpertsCase {
	return []ggExpertsCase{
		{gu: op.GGMLQ4_K, up: op.GGMLQ4_K, dn: op.GGMLQ6_K, split: true, E: 5, D: 256, I: 256, K: 2},
		{gu: op.GGMLQ8_0, dn: op.GGMLMXFP4, E: 6, D: 64, I: 96, K: 3},
		{gu: op.GGMLQ5_0, up: op.GGMLIQ4_NL, dn: op.GGMLIQ4_XS, split: true, E: 5, D: 96, I: 256, K: 2},
	}
}

// TestGGExperts: the grouped expert path with GGML stacks at T = 1, 3 and 17 (experts without
// rows, empty slots) with each kernel of op "qmm_gg" (and the host's choice), against the
// float64 reference (the decoded experts through optest.RefMoEExperts); the slot rows exactly;
// qmm_gg_grouped and qmm_gg_tensor_grouped give the bits of gemm_w32_grouped on the decoded
// experts.
func TestGGExperts(t *testing.T) {
	b := testBackend(t)
	tol := optest.Tolerances()["MoEExperts.ye"] * OpTolScale
	worst := map[string]float64{}
	for ci, c := range ggExpertsCases() {
		ex, twin := ggExperts(t, c, uint64(100*ci))
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
			for _, k := range ggKernels {
				what := fmt.Sprintf("%v T%d %s", c, T, kernelName(k))
				preferGG(t, b, k)
				ye, rk := moeRun(t, b, x, idx, T, c.K, ex)
				if !slices.Equal(rk, wantRK) {
					t.Fatalf("%s: rk %v, want %v", what, rk, wantRK)
				}
				e := optest.RelErr(ye[:used*c.D], wantYE[:used*c.D])
				if !(e <= tol) {
					t.Errorf("%s: relative error %.3g > %.3g", what, e, tol)
				}
				worst[kernelName(k)] = max(worst[kernelName(k)], e)
				if k == qmmGGKernel || k == qmmGGTensorKernel || (k == "" && T > qmvMaxRows) {
					checkBitwise(t, what+" vs gemm_w32_grouped on the decoded experts", ye[:used*c.D], twinYE[:used*c.D])
				}
			}
		}
	}
	t.Logf("worst relative error per kernel %v (tolerance %.2g)", worst, tol)
	for _, v := range []string{"qmm_gg_grouped_Q4_K_bm32_bn32_bk32", "qmv_gg_grouped_Q6_K_bm4_bn8_bk256",
		"qmm_gg_tensor_grouped_MXFP4_bm32_bn32_bk32", "qmv_gg_grouped_IQ4_NL_bm4_bn8_bk256", "qmm_gg_grouped_Q5_0_bm32_bn32_bk32"} {
		checkVariant(t, b, v)
	}
}

// TestGGGather: Embed from a table of every type (every stream, the first and last rows) gives
// the decoded rows bit for bit; PLEApply with a Q8_0 n-gram table, a Q4_K key and a Q6_K value
// agrees with its float64 reference (on the decoded weights), and the same table split in parts
// gives the whole table's bits.
func TestGGGather(t *testing.T) {
	b := testBackend(t)
	const V, T, S = 150, 5, 3
	tok := []int32{V - 1, 7, 0, 7, 129}
	for ti, typ := range op.GGMLBlockTypes {
		K := ggK(typ)
		table, dense := randGG(t, typ, uint64(200+ti), V, K)
		H := make([]float32, T*S*K)
		a := op.Embed{H: f32(H), Tokens: i32(tok), T: T, S: S, Table: table}
		exec(t, b, func(p op.Pass) error { return p.Embed(a) }, &a)
		var want []float32
		for _, id := range tok {
			for range S {
				want = append(want, dense.F32[int(id)*K:int(id+1)*K]...)
			}
		}
		checkBitwise(t, "Embed from a "+typ.String()+" table", H, want)
		checkVariant(t, b, fmt.Sprintf("qgather_gg_%v_rep%d_tg%d", typ, S, elemThreads(K/8)))
	}

	const pT, pS, pD, heads, hd, rows = 6, 2, 32, 2, 128, 140
	r := &rng{s: 7}
	pw := &op.PLEWeights{S: pS, D: pD, EmbedDim: heads * hd, HeadDim: hd, Dilation: 3,
		NormKey: r.fill(pS*pD, -0.5, 0.5), NormQuery: r.fill(pS*pD, -0.5, 0.5), NormConv: r.fill(pS*pD, -0.5, 0.5),
		ConvW: r.fill(pS*pD*4, -0.5, 0.5)}
	table, _ := randGG(t, op.GGMLQ8_0, 2, rows, hd)
	key, _ := randGG(t, op.GGMLQ4_K, 3, pS*pD, pw.EmbedDim)
	value, _ := randGG(t, op.GGMLQ6_K, 4, pD, pw.EmbedDim)
	ids := make([]int32, pT*heads)
	for i := range ids {
		ids[i] = int32(r.next() % rows)
	}
	ids[0], ids[1] = rows-1, 0
	pH, st0 := r.fill(pT*pS*pD, -2, 2), r.fill(pw.ConvStateLen(), -1, 1)
	run := func(parts bool) ([]float32, []float32) {
		w := *pw
		w.Key, w.Value = key, value
		h, st := slices.Clone(pH), slices.Clone(st0)
		pa := op.PLEApply{H: f32(h), T: pT, IDs: i32(ids), W: &w, ConvState: f32(st), Eps: 1e-6}
		if parts {
			ps, err := optest.TableParts(table, 70)
			if err != nil {
				t.Fatal(err)
			}
			pa.Parts, pa.PartRows = ps, 70
		} else {
			w.Table = table
		}
		exec(t, b, func(p op.Pass) error { return p.PLEApply(pa) }, &pa)
		return h, st
	}
	h, st := run(false)
	ref := *pw
	ref.Table, ref.Key, ref.Value = table, key, value
	wantH, wantSt := optest.RefPLEApply(pH, pT, ids, &ref, st0, 1e-6)
	checkClose64(t, "PLEApply.H GGML", h, wantH, optest.Tolerances()["PLEApply.H"]*OpTolScale)
	checkClose64(t, "PLEApply.convState GGML", st, wantSt, optest.Tolerances()["PLEApply.convState"]*OpTolScale)
	checkVariant(t, b, "qgather_gg_Q8_0_rep1_tg")
	h2, st2 := run(true)
	checkBitwise(t, "PLEApply.H from the table's parts", h2, h)
	checkBitwise(t, "PLEApply.convState from the table's parts", st2, st)
}

// TestGGGatherAllBits: Embed from tables of entirely random bytes (halves of every class:
// subnormal, infinite, NaN; every sub-block scale and code; MXFP4 blocks with each of the 256
// exponents, 0 and 1 giving subnormal scales and 255 overflowing) gives optest.DequantGGML's
// values bit for bit (any NaN for a NaN).
func TestGGGatherAllBits(t *testing.T) {
	b := testBackend(t)
	for ti, typ := range op.GGMLBlockTypes {
		V, K := 64, typ.BlockSize()
		if typ == op.GGMLMXFP4 {
			V = 256
		}
		r := &rng{s: uint64(300 + ti)}
		rb, _ := typ.RowBytes(K)
		data := make([]byte, V*rb)
		for i := range data {
			data[i] = byte(r.next())
		}
		if typ == op.GGMLMXFP4 {
			for v := 0; v < V; v++ {
				data[v*rb] = byte(v) // one block per row: row v has exponent v
			}
		}
		table, err := op.NewMatrixGGML(V, K, &op.GGMLBlocks{Type: typ, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		tok := make([]int32, V)
		for i := range tok {
			tok[i] = int32(i)
		}
		H := make([]float32, V*K)
		a := op.Embed{H: f32(H), Tokens: i32(tok), T: V, S: 1, Table: table}
		exec(t, b, func(p op.Pass) error { return p.Embed(a) }, &a)
		var nan, sub int
		for i, w := range optest.DequantGGML(table) {
			g := H[i]
			switch {
			case w != w && g != g:
				nan++
			case math.Float32bits(g) != math.Float32bits(w):
				t.Fatalf("%v: element %d of row %d: %v (%#x), want %v (%#x)", typ, i%K, i/K, g, math.Float32bits(g), w, math.Float32bits(w))
			case w != 0 && math.Abs(float64(w)) < 0x1p-126:
				sub++
			}
		}
		t.Logf("%v: %d values, bitwise equal but for %d NaN on both sides; %d subnormal", typ, V*K, nan, sub)
	}
}

// ggStatic is the static threadgroup memory of each GGML kernel (bytes): qmm_gg's tiles are
// qmm_affine's (8 KiB); qmv_gg and qgather_gg use none.
var ggStatic = map[string]int{
	"qmm_gg": 8192, "qmm_gg_grouped": 8192, "qmm_gg_tensor": 8192, "qmm_gg_tensor_grouped": 8192,
	"qmv_gg": 0, "qmv_gg_grouped": 0, "qgather_gg": 0,
}

// TestGGSchedules: every GGML kernel under the reversed and shuffled lane schedules and in the
// AddressSanitizer build (the blocks at their exact length: a Q3_K weight of 110-byte blocks, an
// MXFP4 one of 17-byte blocks) gives the forward schedule's bits; the static threadgroup memory
// of each kernel is ggStatic's.
func TestGGSchedules(t *testing.T) {
	q3, _ := randGG(t, op.GGMLQ3_K, 31, 37, 256)
	mx, _ := randGG(t, op.GGMLMXFP4, 32, 37, 64)
	c := ggExpertsCases()[1]
	ex, _ := ggExperts(t, c, 77)
	table, _ := randGG(t, op.GGMLQ5_1, 33, 21, 64)
	x17, x3 := optest.Floats(34, 17*256, 1), optest.Floats(35, 3*256, 1)
	mx17x := optest.Floats(36, 17*64, 1)
	e17, e3 := optest.Floats(37, 17*c.D, 1), optest.Floats(38, 3*c.D, 1)
	idx17, idx3 := quantRoute(39, 17, c.K, c.E), quantRoute(40, 3, c.K, c.E)
	tok := []int32{20, 0, 5}
	devs := compareSchedules(t, append(schedules, emu.Options{Threads: 2, ASan: true}), noPrefer, func(b *Backend) [][]float32 {
		var out [][]float32
		for _, k := range []string{qmmGGKernel, qmmGGTensorKernel} {
			preferGG(t, b, k)
			out = append(out, matMuls(t, b, q3, []int{17}, [][]float32{x17})...)
			out = append(out, matMuls(t, b, mx, []int{17}, [][]float32{mx17x})...)
			ye, _ := moeRun(t, b, e17, idx17, 17, c.K, ex)
			out = append(out, ye)
		}
		preferGG(t, b, "")
		out = append(out, matMuls(t, b, q3, []int{3}, [][]float32{x3})...)
		ye, _ := moeRun(t, b, e3, idx3, 3, c.K, ex)
		H := make([]float32, len(tok)*2*64)
		a := op.Embed{H: f32(H), Tokens: i32(tok), T: len(tok), S: 2, Table: table}
		exec(t, b, func(p op.Pass) error { return p.Embed(a) }, &a)
		return append(out, ye, H)
	})
	for _, dev := range devs {
		seen := map[string]bool{}
		for _, st := range dev.Stats() {
			want, ok := ggStatic[st.Kernel]
			if !ok {
				continue
			}
			seen[st.Kernel] = true
			if st.StaticThreadgroupMemory != want {
				t.Errorf("%s: %d B of static threadgroup memory, want %d", st.Kernel, st.StaticThreadgroupMemory, want)
			}
		}
		if len(seen) != len(ggStatic) {
			t.Errorf("%s: kernels with stats %v, want all of %v", dev.Name(), seen, ggStatic)
		}
	}
}

// TestGGUpload: GGML weights stay as stored on the device (the store's bytes are their blocks,
// Matrix.Bytes, uploaded once however many passes read them), the experts stacked per
// projection; experts whose types differ within a projection are refused with ErrUnsupported
// naming both types, and a malformed weight with ErrShape, before any work.
func TestGGUpload(t *testing.T) {
	b := testBackend(t)
	w, _ := randGG(t, op.GGMLQ4_K, 41, 40, 256)
	c := ggExpertsCases()[1]
	ex, _ := ggExperts(t, c, 42)
	x := optest.Floats(43, 2*256, 1)
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
			t.Fatalf("pass %d: %d weight bytes on the device, want the stored %d", i, got, want)
		}
	}
	t.Logf("resident weight bytes %d (as stored); the decoded float32 weights would take %d", want, 4*(40*256+c.E*3*c.D*c.I))

	mixed := *ex
	mixed.Down = slices.Clone(ex.Down)
	mixed.Down[2], _ = randGG(t, op.GGMLQ4_0, 46, c.D, c.I)
	err := pass(func(p op.Pass) error {
		return p.MoEExperts(op.MoEExperts{YE: YE, RK: RK, X: MX, Idx: IDX, T: 2, K: c.K, Ex: &mixed})
	})
	if !errors.Is(err, op.ErrUnsupported) || !strings.Contains(err.Error(), "GGML Q4_0") || !strings.Contains(err.Error(), "GGML MXFP4") {
		t.Errorf("experts of two types: %v", err)
	}
	bad := *w
	bad.GG = &op.GGMLBlocks{Type: w.GG.Type, Data: w.GG.Data[:len(w.GG.Data)-1]}
	y0 := slices.Clone(Y.F32())
	err = pass(func(p op.Pass) error { return p.MatMul(op.MatMul{Y: Y, X: X, T: 2, W: &bad}) })
	if !errors.Is(err, op.ErrShape) || !slices.Equal(Y.F32(), y0) {
		t.Errorf("short blocks: %v (y changed: %v)", err, !slices.Equal(Y.F32(), y0))
	}
}
