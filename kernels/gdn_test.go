package kernels

import (
	"github.com/stratakernels/strata/op"

	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op/optest"
)

// The float64 references are op/optest's (RefL2Norm, RefGDNScan, RefGDNPost: the equations of
// the op docs, transformers' Qwen3NextGatedDeltaNet / torch_recurrent_gated_delta_rule /
// RMSNormGated).

// gdnRefNorm l2-normalises each length-d row of x in float64 and multiplies it by scale.
func gdnRefNorm(x []float32, d int, scale float64) []float64 {
	return optest.RefL2Norm(optest.To64(x), d, scale)
}

// gdnRelDiff returns max |got - want| / max |want|.
func gdnRelDiff(got []float32, want []float64) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var d, m float64
	for i, w := range want {
		d = max(d, math.Abs(float64(got[i])-w))
		m = max(m, math.Abs(w))
	}
	if m == 0 {
		return d
	}
	return d / m
}

func gdnParams(c optest.GDNCase) op.GDNParams {
	p := op.GDNParams{T: c.T, Hk: c.Hk, Hv: c.Hv, Dk: c.Dk, Dv: c.Dv, ConvK: c.ConvK, Map: op.Grouped}
	if c.Tiled {
		p.Map = op.Tiled
	}
	return p
}

// gdnRunScan normalises in.Q/in.K with GDNNormQK and scans with the given mode.
func gdnRunScan(t testing.TB, c optest.GDNCase, in optest.GDNInputs, mode op.ScanMode) (o, state, q, k []float32) {
	q, k = slices.Clone(in.Q), slices.Clone(in.K)
	if err := gdnNormQK(q, k, c.T, c.Hk, c.Dk); err != nil {
		t.Fatal(err)
	}
	o = make([]float32, c.T*c.Hv*c.Dv)
	state = slices.Clone(in.State)
	if err := gdnScan(o, state, q, k, in.V, in.G, in.Beta, gdnParams(c), mode); err != nil {
		t.Fatal(err)
	}
	return o, state, q, k
}

func TestGDNGolden(t *testing.T) { forEachKernel(t, testGDNGolden) }

func testGDNGolden(t *testing.T) {
	f, err := safetensors.Open("../testdata/goldens/op_gdn.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	get := func(name string) []float32 {
		tn, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		x, err := tn.Float32()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	q, k, v, g, beta := get("q"), get("k"), get("v"), get("g"), get("beta")
	stIn, oWant, stWant := get("state_in"), get("o"), get("state_out")
	p := op.GDNParams{T: 100, Hk: 16, Hv: 48, Dk: 128, Dv: 128, Map: op.Grouped}
	if err := gdnNormQK(q, k, p.T, p.Hk, p.Dk); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []op.ScanMode{op.Chunked, op.Recurrent} {
		o := make([]float32, len(oWant))
		st := slices.Clone(stIn)
		if err := gdnScan(o, st, q, k, v, g, beta, p, mode); err != nil {
			t.Fatal(err)
		}
		do, ds := gdnRelDiff(o, optest.To64(oWant)), gdnRelDiff(st, optest.To64(stWant))
		t.Logf("mode %d: o max|diff|/max|o| = %.3g, state %.3g", mode, do, ds)
		if do > 1e-4 || ds > 1e-4 {
			t.Errorf("mode %d: o rel diff %.3g, state rel diff %.3g > 1e-4", mode, do, ds)
		}
	}
}

func TestGDNScanCases(t *testing.T) { forEachKernel(t, testGDNScanCases) }

func testGDNScanCases(t *testing.T) {
	var worst [2]float64
	for _, c := range optest.GDNCases() {
		t.Run(fmt.Sprintf("%s_T%d", c.Name, c.T), func(t *testing.T) {
			in := c.Inputs()
			qn := gdnRefNorm(in.Q, c.Dk, 1/math.Sqrt(float64(c.Dk)))
			kn := gdnRefNorm(in.K, c.Dk, 1)
			oRef, stRef := optest.RefGDNScan(c.Params(), qn, kn, optest.To64(in.V), optest.To64(in.G), optest.To64(in.Beta), optest.To64(in.State))
			var outs [2][]float32
			for mi, mode := range []op.ScanMode{op.Chunked, op.Recurrent} {
				o, st, q, k := gdnRunScan(t, c, in, mode)
				if d := max(gdnRelDiff(q, qn), gdnRelDiff(k, kn)); d > 1e-6 {
					t.Fatalf("GDNNormQK rel diff %.3g", d)
				}
				do, ds := gdnRelDiff(o, oRef), gdnRelDiff(st, stRef)
				worst[mi] = max(worst[mi], do, ds)
				if do > 1e-5 || ds > 1e-5 {
					t.Errorf("mode %d: o rel diff %.3g, state rel diff %.3g > 1e-5", mode, do, ds)
				}
				outs[mi] = o
			}
			if d := gdnRelDiff(outs[0], optest.To64(outs[1])); d > 1e-5 {
				t.Errorf("chunked vs recurrent: rel diff %.3g > 1e-5", d)
			}
		})
	}
	t.Logf("worst rel diff vs float64 reference: chunked %.3g, recurrent %.3g", worst[0], worst[1])
}

func TestGDNHeadMaps(t *testing.T) { forEachKernel(t, testGDNHeadMaps) }

func testGDNHeadMaps(t *testing.T) {
	base := optest.GDNCase{T: 70, Hk: 2, Hv: 6, Dk: 16, Dv: 8, ConvK: 4, Seed: 99}
	in := base.Inputs()
	var outs [2][]float32
	for i, tiled := range []bool{false, true} {
		c := base
		c.Tiled = tiled
		oRef, _ := optest.RefGDNScan(c.Params(), gdnRefNorm(in.Q, c.Dk, 1/math.Sqrt(float64(c.Dk))), gdnRefNorm(in.K, c.Dk, 1),
			optest.To64(in.V), optest.To64(in.G), optest.To64(in.Beta), optest.To64(in.State))
		for _, mode := range []op.ScanMode{op.Chunked, op.Recurrent} {
			o, _, _, _ := gdnRunScan(t, c, in, mode)
			if d := gdnRelDiff(o, oRef); d > 1e-5 {
				t.Errorf("tiled=%v mode %d: rel diff %.3g", tiled, mode, d)
			}
			outs[i] = o
		}
	}
	if d := gdnRelDiff(outs[0], optest.To64(outs[1])); d < 1e-2 {
		t.Errorf("grouped and tiled outputs agree (rel diff %.3g): the case does not tell the maps apart", d)
	}
}

func TestGDNScanSplit(t *testing.T) { forEachKernel(t, testGDNScanSplit) }

func testGDNScanSplit(t *testing.T) {
	c := optest.GDNCase{T: 200, Hk: 1, Hv: 3, Dk: 128, Dv: 128, ConvK: 4, Seed: 7}
	in := c.Inputs()
	p := gdnParams(c)
	q, k := slices.Clone(in.Q), slices.Clone(in.K)
	if err := gdnNormQK(q, k, c.T, c.Hk, c.Dk); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []op.ScanMode{op.Chunked, op.Recurrent} {
		oOne := make([]float32, c.T*c.Hv*c.Dv)
		stOne := slices.Clone(in.State)
		if err := gdnScan(oOne, stOne, q, k, in.V, in.G, in.Beta, p, mode); err != nil {
			t.Fatal(err)
		}
		for _, t1 := range []int{64, 77} {
			o := make([]float32, len(oOne))
			st := slices.Clone(in.State)
			for _, r := range [][2]int{{0, t1}, {t1, c.T}} {
				pp := p
				pp.T = r[1] - r[0]
				qk := func(x []float32) []float32 { return x[r[0]*c.Hk*c.Dk : r[1]*c.Hk*c.Dk] }
				hv := func(x []float32, d int) []float32 { return x[r[0]*c.Hv*d : r[1]*c.Hv*d] }
				if err := gdnScan(hv(o, c.Dv), st, qk(q), qk(k), hv(in.V, c.Dv), hv(in.G, 1), hv(in.Beta, 1), pp, mode); err != nil {
					t.Fatal(err)
				}
			}
			do, ds := gdnRelDiff(o, optest.To64(oOne)), gdnRelDiff(st, optest.To64(stOne))
			if do > 1e-6 || ds > 1e-6 {
				t.Errorf("mode %d split at %d: o rel diff %.3g, state %.3g > 1e-6", mode, t1, do, ds)
			}
		}
	}
}

func gdnCallPre(t testing.TB, c optest.GDNCase, in optest.GDNInputs, convState []float32) (q, k, v, g, beta []float32) {
	q, k = make([]float32, c.T*c.Hk*c.Dk), make([]float32, c.T*c.Hk*c.Dk)
	v, g, beta = make([]float32, c.T*c.Hv*c.Dv), make([]float32, c.T*c.Hv), make([]float32, c.T*c.Hv)
	if err := gdnPre(q, k, v, g, beta, in.QKV, in.A, in.B, convState, in.ConvW, in.ALog, in.DtBias, gdnParams(c)); err != nil {
		t.Fatal(err)
	}
	return
}

// TestGDNPreSplit: two calls carrying the conv state equal one call, including a first call
// shorter than the conv history (T = 2 < ConvK-1 = 3).
func TestGDNPreSplit(t *testing.T) {
	c := optest.GDNCase{T: 70, Hk: 2, Hv: 6, Dk: 16, Dv: 8, ConvK: 4, Seed: 5}
	in := c.Inputs()
	st := slices.Clone(in.ConvState)
	one := [][]float32{}
	q, k, v, g, beta := gdnCallPre(t, c, in, st)
	one = append(one, q, k, v, g, beta)
	for _, t1 := range []int{2, 1, 33} {
		stS := slices.Clone(in.ConvState)
		parts := make([][]float32, 5)
		for _, r := range [][2]int{{0, t1}, {t1, c.T}} {
			cc := c
			cc.T = r[1] - r[0]
			C := c.Channels()
			ii := in
			ii.QKV = in.QKV[r[0]*C : r[1]*C]
			ii.A, ii.B = in.A[r[0]*c.Hv:r[1]*c.Hv], in.B[r[0]*c.Hv:r[1]*c.Hv]
			q, k, v, g, beta := gdnCallPre(t, cc, ii, stS)
			for i, x := range [][]float32{q, k, v, g, beta} {
				parts[i] = append(parts[i], x...)
			}
		}
		for i := range parts {
			if d := gdnRelDiff(parts[i], optest.To64(one[i])); d > 1e-6 {
				t.Errorf("split at %d: output %d rel diff %.3g > 1e-6", t1, i, d)
			}
		}
		if !slices.Equal(stS, st) {
			t.Errorf("split at %d: conv state differs from one call", t1)
		}
	}
}

func TestGDNPost(t *testing.T) {
	for _, c := range optest.GDNCases() {
		if c.Dk != 16 {
			continue
		}
		in := c.Inputs()
		o := in.V // any [T, Hv, Dv] tensor
		for _, act := range []op.GateAct{op.ActSilu, op.ActSigmoid} {
			y := make([]float32, len(o))
			if err := gdnPost(y, o, in.Z, c.T, c.Hv, c.Dv, in.NormW, 1e-6, act); err != nil {
				t.Fatal(err)
			}
			if d := gdnRelDiff(y, optest.RefGDNPost(o, in.Z, c.Dv, in.NormW, 1e-6, act)); d > 1e-6 {
				t.Errorf("%s T%d act %d: rel diff %.3g", c.Name, c.T, act, d)
			}
			// In place over o gives the same result.
			y2 := slices.Clone(o)
			if err := gdnPost(y2, y2, in.Z, c.T, c.Hv, c.Dv, in.NormW, 1e-6, act); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(y, y2) {
				t.Errorf("%s T%d act %d: in-place result differs", c.Name, c.T, act)
			}
		}
	}
}

// TestGDNDeterminism: bitwise identical outputs across runs and GOMAXPROCS 1 / 2 (the unit split
// of the scan changes with GOMAXPROCS when Hk is small).
func TestGDNDeterminism(t *testing.T) { forEachKernel(t, testGDNDeterminism) }

func testGDNDeterminism(t *testing.T) {
	cases := []optest.GDNCase{
		{T: 150, Hk: 1, Hv: 3, Dk: 128, Dv: 128, ConvK: 4, Seed: 11},
		{T: 150, Hk: 2, Hv: 6, Dk: 16, Dv: 8, ConvK: 4, Seed: 12, Tiled: true},
	}
	run := func(c optest.GDNCase) [][]float32 {
		in := c.Inputs()
		st := slices.Clone(in.ConvState)
		q, k, v, g, beta := gdnCallPre(t, c, in, st)
		res := [][]float32{q, k, v, g, beta, st}
		p := gdnParams(c)
		for _, mode := range []op.ScanMode{op.Chunked, op.Recurrent} {
			o := make([]float32, len(v))
			state := slices.Clone(in.State)
			if err := gdnScan(o, state, q, k, v, g, beta, p, mode); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, len(o))
			if err := gdnPost(y, o, in.Z, c.T, c.Hv, c.Dv, in.NormW, 1e-6, op.ActSigmoid); err != nil {
				t.Fatal(err)
			}
			res = append(res, o, state, y)
		}
		return res
	}
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for _, c := range cases {
		var ref [][]float32
		for i, procs := range []int{2, 2, 1} {
			runtime.GOMAXPROCS(procs)
			got := run(c)
			if i == 0 {
				ref = got
				continue
			}
			for j := range got {
				if !slices.Equal(got[j], ref[j]) {
					t.Errorf("case Hk%d Hv%d run %d (GOMAXPROCS %d): output %d not bitwise identical", c.Hk, c.Hv, i, procs, j)
				}
			}
		}
	}
}

func TestGDNBadInput(t *testing.T) {
	c := optest.GDNCase{T: 5, Hk: 2, Hv: 6, Dk: 4, Dv: 4, ConvK: 4, Seed: 3}
	in := c.Inputs()
	good := gdnParams(c)
	n := func(x int) []float32 { return make([]float32, x) }
	T, HkDk, HvDv, C := c.T, c.Hk*c.Dk, c.Hv*c.Dv, c.Channels()
	pre := func(p op.GDNParams, qkv, st []float32) error {
		return gdnPre(n(T*HkDk), n(T*HkDk), n(T*HvDv), n(T*c.Hv), n(T*c.Hv), qkv, in.A, in.B, st, in.ConvW, in.ALog, in.DtBias, p)
	}
	scan := func(p op.GDNParams, mode op.ScanMode, o, q []float32) error {
		return gdnScan(o, n(c.Hv*c.Dk*c.Dv), q, n(T*HkDk), n(T*HvDv), n(T*c.Hv), n(T*c.Hv), p, mode)
	}
	with := func(f func(p *op.GDNParams)) op.GDNParams { p := good; f(&p); return p }
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"pre qkv length", pre(good, n(T*C-1), n(3*C)), op.ErrShape},
		{"pre state length", pre(good, n(T*C), n(2*C)), op.ErrShape},
		{"pre Hv%Hk", pre(with(func(p *op.GDNParams) { p.Hk = 4 }), n(T*C), n(3*C)), op.ErrInvalidArgument},
		{"pre T=0", pre(with(func(p *op.GDNParams) { p.T = 0 }), n(0), n(3*C)), op.ErrShape},
		{"pre ConvK=0", pre(with(func(p *op.GDNParams) { p.ConvK = 0 }), n(T*C), n(3*C)), op.ErrShape},
		{"scan o length", scan(good, op.Chunked, n(T*HvDv+1), n(T*HkDk)), op.ErrShape},
		{"scan q length", scan(good, op.Recurrent, n(T*HvDv), n(T*HkDk-1)), op.ErrShape},
		{"scan Hv%Hk", scan(with(func(p *op.GDNParams) { p.Hv = 5 }), op.Chunked, n(T*HvDv), n(T*HkDk)), op.ErrInvalidArgument},
		{"scan T=0", scan(with(func(p *op.GDNParams) { p.T = 0 }), op.Chunked, n(0), n(0)), op.ErrShape},
		{"scan negative Dk", scan(with(func(p *op.GDNParams) { p.Dk = -4 }), op.Chunked, n(T*HvDv), n(T*HkDk)), op.ErrShape},
		{"scan unknown mode", scan(good, op.ScanMode(7), n(T*HvDv), n(T*HkDk)), op.ErrInvalidArgument},
		{"scan unknown map", scan(with(func(p *op.GDNParams) { p.Map = op.HeadMap(-1) }), op.Chunked, n(T*HvDv), n(T*HkDk)), op.ErrInvalidArgument},
		{"norm length", gdnNormQK(n(T*HkDk), n(T*HkDk+1), T, c.Hk, c.Dk), op.ErrShape},
		{"norm T=0", gdnNormQK(nil, nil, 0, c.Hk, c.Dk), op.ErrShape},
		{"post z length", gdnPost(n(T*HvDv), n(T*HvDv), n(T*HvDv-1), T, c.Hv, c.Dv, n(c.Dv), 1e-6, op.ActSilu), op.ErrShape},
		{"post w length", gdnPost(n(T*HvDv), n(T*HvDv), n(T*HvDv), T, c.Hv, c.Dv, n(c.Dv+1), 1e-6, op.ActSilu), op.ErrShape},
		{"post T=0", gdnPost(nil, nil, nil, 0, c.Hv, c.Dv, n(c.Dv), 1e-6, op.ActSilu), op.ErrShape},
		{"post unknown act", gdnPost(n(T*HvDv), n(T*HvDv), n(T*HvDv), T, c.Hv, c.Dv, n(c.Dv), 1e-6, op.GateAct(9)), op.ErrInvalidArgument},
		{"post NaN eps", gdnPost(n(T*HvDv), n(T*HvDv), n(T*HvDv), T, c.Hv, c.Dv, n(c.Dv), float32(math.NaN()), op.ActSilu), op.ErrInvalidArgument},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: got %v, want an error wrapping %v", tc.name, tc.err, tc.want)
		}
	}
	// The good parameters are accepted (the table above tests the checks, not a broken op).
	if err := pre(good, n(T*C), n(3*C)); err != nil {
		t.Errorf("good pre: %v", err)
	}
	if err := scan(good, op.Chunked, n(T*HvDv), n(T*HkDk)); err != nil {
		t.Errorf("good scan: %v", err)
	}
}

// BenchmarkGDNScan runs the scan at Qwen3.8-Flash-Next's shape (Hk 16, Hv 48, dk = dv = 128)
// for T = 512, 1024, 2048. GFLOP/s counts the nominal chunked FLOPs (optest.GDNScanFLOPs, about
// 182K per token per value head) for both modes, so the two are comparable as time. The
// recurrent mode runs at T = 512 only (it is the slow reference form).
func BenchmarkGDNScan(b *testing.B) {
	b.Logf("kernels: %s", GDNKernel())
	for _, T := range []int{512, 1024, 2048} {
		c := optest.GDNCase{T: T, Hk: 16, Hv: 48, Dk: 128, Dv: 128, ConvK: 4, Seed: 1}
		in := c.Inputs()
		q, k := slices.Clone(in.Q), slices.Clone(in.K)
		if err := gdnNormQK(q, k, c.T, c.Hk, c.Dk); err != nil {
			b.Fatal(err)
		}
		p := gdnParams(c)
		o := make([]float32, c.T*c.Hv*c.Dv)
		flops := optest.GDNScanFLOPs(c.T, c.Dk, c.Dv, op.GDNChunk) * float64(c.Hv)
		for _, mode := range []op.ScanMode{op.Chunked, op.Recurrent} {
			if mode == op.Recurrent && T != 512 {
				continue
			}
			name := fmt.Sprintf("%s/T%d", map[op.ScanMode]string{op.Chunked: "chunked", op.Recurrent: "recurrent"}[mode], T)
			b.Run(name, func(b *testing.B) {
				state := slices.Clone(in.State)
				for b.Loop() {
					if err := gdnScan(o, state, q, k, in.V, in.G, in.Beta, p, mode); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				b.ReportMetric(float64(c.T)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}

// TestGDNConvKernels: on every kernel set, GDNPre's q, k and v are bitwise the unfused float32
// conv chain (products and sums rounded one by one, taps in order) through the set's SiLU and
// normalisation, for channel blocks inside one of q, k, v and across two, widths that are not
// multiples of 8 and T below ConvK-1; gdnConv alone is that chain bitwise and within 2K u sum
// |w x| of a float64 conv.
func TestGDNConvKernels(t *testing.T) {
	cases := []optest.GDNCase{
		{T: 70, Hk: 2, Hv: 4, Dk: 16, Dv: 12, ConvK: 4, Seed: 21}, // C 112: blocks across q|k|v
		{T: 33, Hk: 4, Hv: 8, Dk: 64, Dv: 13, ConvK: 4, Seed: 22}, // q, k in place; v 104 wide
		{T: 9, Hk: 1, Hv: 2, Dk: 128, Dv: 128, ConvK: 2, Seed: 23},
		{T: 2, Hk: 2, Hv: 2, Dk: 24, Dv: 28, ConvK: 5, Seed: 24},
	}
	forEachKernel(t, func(t *testing.T) {
		for _, c := range cases {
			in := c.Inputs()
			st := slices.Clone(in.ConvState)
			q, k, v, _, _ := gdnCallPre(t, c, in, st)
			C, K, qkC := c.Channels(), c.ConvK, c.Hk*c.Dk
			hist := append(slices.Clone(in.ConvState), in.QKV...) // ConvK-1 rows of state, then T
			pre := make([]float32, c.T*C)
			for tt := 0; tt < c.T; tt++ {
				for ch := 0; ch < C; ch++ {
					var y float32
					for j := 0; j < K; j++ {
						y += float32(in.ConvW[ch*K+j] * hist[(tt+j)*C+ch])
					}
					pre[tt*C+ch] = y
				}
			}
			siluRow(pre, pre, 1)
			wq, wk, wv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
			for tt := 0; tt < c.T; tt++ {
				row := pre[tt*C : (tt+1)*C]
				copy(wq[tt*qkC:], row[:qkC])
				copy(wk[tt*qkC:], row[qkC:2*qkC])
				copy(wv[tt*c.Hv*c.Dv:], row[2*qkC:])
			}
			if err := gdnNormQK(wq, wk, c.T, c.Hk, c.Dk); err != nil {
				t.Fatal(err)
			}
			for i, p := range [][2][]float32{{q, wq}, {k, wk}, {v, wv}} {
				if !slices.Equal(p[0], p[1]) {
					t.Errorf("%+v: output %d differs from the unfused conv chain", c, i)
				}
			}
			if !slices.Equal(st, hist[len(hist)-(K-1)*C:]) {
				t.Errorf("%+v: conv state is not the last ConvK-1 inputs", c)
			}
		}
	})
	// gdnConv alone against float64.
	forEachKernel(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(7, 8))
		for _, n := range []int{1, 7, 8, 13, 64} {
			for K := 1; K <= 5; K++ {
				ws := 64
				w := make([]float32, K*ws)
				xs := make([][]float32, K)
				rows := make([]*float32, K)
				for i := range w {
					w[i] = float32(r.NormFloat64())
				}
				for j := range xs {
					xs[j] = make([]float32, n)
					for i := range xs[j] {
						xs[j][i] = float32(r.NormFloat64())
					}
					rows[j] = &xs[j][0]
				}
				dst := make([]float32, n)
				gdnConv(dst, rows, w, ws)
				for i := range dst {
					var ref, mag float64
					var y float32
					for j := range xs {
						p := float64(w[j*ws+i]) * float64(xs[j][i])
						ref += p
						mag += math.Abs(p)
						y += float32(w[j*ws+i] * xs[j][i])
					}
					if dst[i] != y {
						t.Fatalf("n %d K %d element %d: %v, the unfused chain gives %v", n, K, i, dst[i], y)
					}
					if math.Abs(float64(dst[i])-ref) > float64(2*K)*0x1p-24*mag {
						t.Fatalf("n %d K %d element %d: %v, float64 %v", n, K, i, dst[i], ref)
					}
				}
			}
		}
	})
}
