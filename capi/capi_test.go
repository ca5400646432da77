//go:build cgo

package main

import (
	"math"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/strata"
)

// These tests drive the Go side of every export (the functions the //export wrappers call after
// reading their C arguments). The C wrappers themselves are exercised through the built library
// by the tests in tests/ and python/tests.

func testdata(parts ...string) string {
	return filepath.Join(append([]string{"..", "testdata"}, parts...)...)
}

type goldenFile struct {
	t testing.TB
	f *safetensors.File
}

func openGolden(t testing.TB, name string) *goldenFile {
	t.Helper()
	f, err := safetensors.Open(testdata("goldens", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &goldenFile{t, f}
}

func (g *goldenFile) tensor(name string) *safetensors.Tensor {
	g.t.Helper()
	tn, err := g.f.Tensor(name)
	if err != nil {
		g.t.Fatal(err)
	}
	return tn
}

func (g *goldenFile) f32(name string) ([]float32, []int64) {
	g.t.Helper()
	tn := g.tensor(name)
	x, err := tn.Float32()
	if err != nil {
		g.t.Fatal(err)
	}
	return x, tn.Shape
}

func (g *goldenFile) i32(name string) ([]int32, []int64) {
	g.t.Helper()
	tn := g.tensor(name)
	x, err := tn.Int32()
	if err != nil {
		g.t.Fatal(err)
	}
	return x, tn.Shape
}

// goTensor describes Go memory as a strata_tensor would describe C memory.
func goTensor[E float32 | int32 | uint8](name string, x []E, shape ...int64) *tensor {
	var dt int32
	switch any(x).(type) {
	case []float32:
		dt = dtF32
	case []int32:
		dt = dtI32
	case []uint8:
		dt = dtU8
	}
	return &tensor{name: name, present: true, data: unsafe.Pointer(unsafe.SliceData(x)), dtype: dt, shape: shape}
}

func absent(name string) *tensor { return &tensor{name: name} }

func maxAbsDiff(a, b []float32) (d, scale float64) {
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		scale = math.Max(scale, math.Abs(float64(b[i])))
	}
	return d, scale
}

func TestOpsAgainstGoldens(t *testing.T) {
	am := openGolden(t, "op_attn_moe.safetensors")
	gd := openGolden(t, "op_gdn.safetensors")

	t.Run("attention", func(t *testing.T) {
		q, qs := am.f32("attn.q")
		k, ks := am.f32("attn.k")
		v, _ := am.f32("attn.v")
		want, _ := am.f32("attn.o")
		wantLSE, _ := am.f32("attn.lse")
		o := make([]float32, len(want))
		lse := make([]float32, len(wantLSE))
		p := &attentionParams{pos0: 200, selDense: *absent("sel_dense"), selOff: *absent("sel_offsets"), selTok: *absent("sel_tokens")}
		err := attention(testDev, goTensor("q", q, qs...), goTensor("k", k, ks...), goTensor("v", v, ks...),
			goTensor("o", o, qs...), goTensor("lse", lse, qs[0], qs[1]), p) // scale 0: 1/sqrt(256) = 1/16
		if err != nil {
			t.Fatal(err)
		}
		d, s := maxAbsDiff(o, want)
		dl, sl := maxAbsDiff(lse, wantLSE)
		t.Logf("o max|diff| %.3g (rel %.3g), lse max|diff| %.3g (rel %.3g)", d, d/s, dl, dl/sl)
		if d > 1e-4*s || dl > 1e-4*sl {
			t.Fatalf("attention differs from the golden: o %.3g, lse %.3g", d/s, dl/sl)
		}
	})

	t.Run("gdn", func(t *testing.T) {
		q, qs := gd.f32("q")
		k, _ := gd.f32("k")
		v, vs := gd.f32("v")
		g, gs := gd.f32("g")
		beta, _ := gd.f32("beta")
		stIn, ss := gd.f32("state_in")
		want, _ := gd.f32("o")
		wantState, _ := gd.f32("state_out")
		for _, mode := range []int32{0, 1} {
			o := make([]float32, len(want))
			state := append([]float32(nil), stIn...)
			qc, kc := append([]float32(nil), q...), append([]float32(nil), k...)
			err := gdnScan(testDev, goTensor("q", qc, qs...), goTensor("k", kc, qs...), goTensor("v", v, vs...),
				goTensor("g", g, gs...), goTensor("beta", beta, gs...), goTensor("state", state, ss...),
				goTensor("o", o, vs...), gdnParams{mode: mode, normalizeQK: true})
			if err != nil {
				t.Fatal(err)
			}
			if !slicesEqual(qc, q) || !slicesEqual(kc, k) {
				t.Fatal("normalize_qk modified the caller's q or k")
			}
			d, s := maxAbsDiff(o, want)
			ds, sst := maxAbsDiff(state, wantState)
			t.Logf("mode %d: o rel %.3g, state rel %.3g", mode, d/s, ds/sst)
			if d > 1e-4*s || ds > 1e-4*sst {
				t.Fatalf("mode %d: gdn differs from the golden: o %.3g, state %.3g", mode, d/s, ds/sst)
			}
		}
	})

	t.Run("moe", func(t *testing.T) {
		ye, ys := am.f32("moe.ye")
		rk, rs := am.i32("moe.rk")
		w, _ := am.f32("moe.w")
		want, _ := am.f32("moe.out")
		T, D := rs[0], ys[1]
		out := make([]float32, len(want))
		if err := moeCombine(testDev, goTensor("ye", ye, ys...), goTensor("rk", rk, rs...), goTensor("w", w, rs...),
			goTensor("out", out, T, D), absent("shared"), absent("beta")); err != nil {
			t.Fatal(err)
		}
		d, s := maxAbsDiff(out, want)
		t.Logf("moe combine rel %.3g", d/s)
		if d > 1e-4*s {
			t.Fatalf("moe combine differs from the golden: %.3g", d/s)
		}
		// Fused GatedResidual write: H[t,s] += beta[t,s] * (combine + shared), against the
		// golden combine and a float64 evaluation of the write.
		const S = 2
		H := make([]float32, T*S*D)
		beta := make([]float32, T*S)
		shared := make([]float32, T*D)
		for i := range H {
			H[i] = float32(math.Sin(float64(i)))
		}
		for i := range beta {
			beta[i] = 0.5 + float32(i%7)/7
		}
		for i := range shared {
			shared[i] = float32(math.Cos(float64(i) * 0.3))
		}
		H0 := append([]float32(nil), H...)
		if err := moeCombine(testDev, goTensor("ye", ye, ys...), goTensor("rk", rk, rs...), goTensor("w", w, rs...),
			goTensor("out", H, T, S, D), goTensor("shared", shared, T, D), goTensor("beta", beta, T, S)); err != nil {
			t.Fatal(err)
		}
		ref := make([]float32, len(H))
		for tt := int64(0); tt < T; tt++ {
			for s := int64(0); s < S; s++ {
				for d := int64(0); d < D; d++ {
					u := float64(want[tt*D+d]) + float64(shared[tt*D+d])
					ref[(tt*S+s)*D+d] = float32(float64(H0[(tt*S+s)*D+d]) + float64(beta[tt*S+s])*u)
				}
			}
		}
		d, s = maxAbsDiff(H, ref)
		if d > 1e-4*s {
			t.Fatalf("fused write differs: %.3g", d/s)
		}
	})
}

func slicesEqual(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// sameStatus reports whether err is an error that maps to the same strata_status as want.
func sameStatus(err, want error) bool { return err != nil && codeOf(err) == codeOf(want) }

// TestTensorChecks feeds malformed descriptors to each op: every one is rejected with the
// matching sentinel before any output is written.
func TestTensorChecks(t *testing.T) {
	const T, H, D = 3, 2, 4
	q := make([]float32, T*H*D)
	kv := make([]float32, T*H*D)
	o := make([]float32, T*H*D)
	for i := range q {
		q[i], kv[i] = float32(i%5)*0.1, float32(i%3)*0.2
	}
	good := func() []*tensor {
		return []*tensor{goTensor("q", q, T, H, D), goTensor("k", kv, T, H, D), goTensor("v", kv, T, H, D),
			goTensor("o", o, T, H, D), absent("lse")}
	}
	noSel := func() *attentionParams {
		return &attentionParams{selDense: *absent("sel_dense"), selOff: *absent("sel_offsets"), selTok: *absent("sel_tokens")}
	}
	i32 := make([]int32, T*H*D)
	mis := make([]float32, T*H*D+1)
	cases := []struct {
		name string
		edit func(ts []*tensor, p *attentionParams)
		want error
	}{
		{"NULL q", func(ts []*tensor, p *attentionParams) { ts[0] = absent("q") }, strata.ErrInvalidArgument},
		{"NULL data", func(ts []*tensor, p *attentionParams) { ts[1].data = nil }, strata.ErrInvalidArgument},
		{"int32 q", func(ts []*tensor, p *attentionParams) { ts[0] = goTensor("q", i32, T, H, D) }, strata.ErrDType},
		{"unknown dtype", func(ts []*tensor, p *attentionParams) { ts[0].dtype = 42 }, strata.ErrDType},
		{"bf16 q", func(ts []*tensor, p *attentionParams) { ts[0].dtype = dtBF16 }, strata.ErrDType},
		{"ndim 2", func(ts []*tensor, p *attentionParams) { ts[0].shape = []int64{T, H * D} }, strata.ErrShape},
		{"o wrong shape", func(ts []*tensor, p *attentionParams) { ts[3].shape = []int64{T, H, D - 1} }, strata.ErrShape},
		{"zero dim", func(ts []*tensor, p *attentionParams) { ts[0].shape = []int64{0, H, D} }, strata.ErrShape},
		{"k rows short", func(ts []*tensor, p *attentionParams) { p.pos0 = 1 }, strata.ErrShape},
		{"negative pos0", func(ts []*tensor, p *attentionParams) { p.pos0 = -1 }, strata.ErrShape},
		{"32-bit overflow", func(ts []*tensor, p *attentionParams) { ts[0].shape = []int64{1 << 20, 1 << 10, 4} }, strata.ErrShape},
		{"strided", func(ts []*tensor, p *attentionParams) { ts[0].strides = []int64{1, T, T * H} }, strata.ErrInvalidArgument},
		{"misaligned", func(ts []*tensor, p *attentionParams) {
			ts[0].data = unsafe.Add(unsafe.Pointer(&mis[0]), 2)
		}, strata.ErrInvalidArgument},
		{"o overlaps q", func(ts []*tensor, p *attentionParams) { ts[3] = goTensor("o", q, T, H, D) }, strata.ErrInvalidArgument},
		{"NaN scale", func(ts []*tensor, p *attentionParams) { p.scale = float32(math.NaN()) }, strata.ErrInvalidArgument},
		{"Hkv not dividing Hq", func(ts []*tensor, p *attentionParams) {
			ts[1] = goTensor("k", make([]float32, T*3*D), T, 3, D)
			ts[2] = goTensor("v", make([]float32, T*3*D), T, 3, D)
		}, strata.ErrInvalidArgument},
		{"selection tokens without offsets", func(ts []*tensor, p *attentionParams) {
			p.selTok = *goTensor("sel_tokens", []int32{0}, 1)
		}, strata.ErrInvalidArgument},
		{"selection beyond causal limit", func(ts []*tensor, p *attentionParams) {
			p.selOff = *goTensor("sel_offsets", []int32{0, 1, 2, 3}, T+1)
			p.selTok = *goTensor("sel_tokens", []int32{1, 0, 0}, 3)
		}, strata.ErrInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clear(o)
			ts, p := good(), noSel()
			c.edit(ts, p)
			err := attention(testDev, ts[0], ts[1], ts[2], ts[3], ts[4], p)
			if !sameStatus(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			for _, x := range o {
				if x != 0 {
					t.Fatal("output written on error")
				}
			}
		})
	}
	// The unedited descriptors pass (the table above fails only through its edits).
	ts := good()
	if err := attention(testDev, ts[0], ts[1], ts[2], ts[3], ts[4], noSel()); err != nil {
		t.Fatal(err)
	}
}

func TestGDNAndMoEChecks(t *testing.T) {
	const T, Hk, Hv, Dk, Dv = 2, 1, 2, 4, 4
	f := func(n int) []float32 { return make([]float32, n) }
	q, k, v, g, beta := f(T*Hk*Dk), f(T*Hk*Dk), f(T*Hv*Dv), f(T*Hv), f(T*Hv)
	state, o := f(Hv*Dk*Dv), f(T*Hv*Dv)
	args := func() []*tensor {
		return []*tensor{goTensor("q", q, T, Hk, Dk), goTensor("k", k, T, Hk, Dk), goTensor("v", v, T, Hv, Dv),
			goTensor("g", g, T, Hv), goTensor("beta", beta, T, Hv), goTensor("state", state, Hv, Dk, Dv), goTensor("o", o, T, Hv, Dv)}
	}
	run := func(a []*tensor, p gdnParams) error {
		return gdnScan(testDev, a[0], a[1], a[2], a[3], a[4], a[5], a[6], p)
	}
	if err := run(args(), gdnParams{}); err != nil {
		t.Fatal(err)
	}
	gcases := []struct {
		name string
		edit func(a []*tensor, p *gdnParams)
		want error
	}{
		{"state wrong shape", func(a []*tensor, p *gdnParams) { a[5].shape = []int64{Hv, Dv, Dk + 1} }, strata.ErrShape},
		{"state aliases v", func(a []*tensor, p *gdnParams) { a[5] = goTensor("state", v, Hv, Dk, Dv) }, strata.ErrInvalidArgument},
		{"unknown head map", func(a []*tensor, p *gdnParams) { p.headMap = 7 }, strata.ErrInvalidArgument},
		{"unknown mode", func(a []*tensor, p *gdnParams) { p.mode = -1 }, strata.ErrInvalidArgument},
		{"g as int32", func(a []*tensor, p *gdnParams) { a[3].dtype = dtI32 }, strata.ErrDType},
		{"Hv not a multiple of Hk", func(a []*tensor, p *gdnParams) {
			// Hk = 2 qk heads of 2, Hv = 3 value heads of 8.
			a[0], a[1] = goTensor("q", f(T*2*2), T, 2, 2), goTensor("k", f(T*2*2), T, 2, 2)
			a[2], a[6] = goTensor("v", f(T*3*8), T, 3, 8), goTensor("o", f(T*3*8), T, 3, 8)
			a[3], a[4] = goTensor("g", f(T*3), T, 3), goTensor("beta", f(T*3), T, 3)
			a[5] = goTensor("state", f(3*2*8), 3, 2, 8)
		}, strata.ErrInvalidArgument},
	}
	for _, c := range gcases {
		t.Run("gdn/"+c.name, func(t *testing.T) {
			a, p := args(), gdnParams{}
			c.edit(a, &p)
			if err := run(a, p); !sameStatus(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}

	const rows, K, D = 3, 2, 4
	ye, w, out := f(rows*D), f(T*K), f(T*D)
	for _, c := range []struct {
		name string
		rk   []int32
		out  *tensor
		want error
	}{
		{"rk out of range", []int32{0, 3, -1, 1}, goTensor("out", out, T, D), strata.ErrInvalidArgument},
		{"rk below -1", []int32{0, -2, -1, 1}, goTensor("out", out, T, D), strata.ErrInvalidArgument},
		{"out too small", []int32{0, 1, -1, 1}, goTensor("out", out[:D], 1, D), strata.ErrShape},
		{"out aliases ye", []int32{0, 1, -1, 1}, goTensor("out", ye[:T*D], T, D), strata.ErrInvalidArgument},
		{"ok", []int32{0, 1, -1, 1}, goTensor("out", out, T, D), nil},
	} {
		t.Run("moe/"+c.name, func(t *testing.T) {
			err := moeCombine(testDev, goTensor("ye", ye, rows, D), goTensor("rk", c.rk, T, K), goTensor("w", w, T, K), c.out, absent("shared"), absent("beta"))
			if c.want == nil && err != nil || c.want != nil && !sameStatus(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// testDev is the cpu device the op tests run on (the emu device's ops are tested through the
// built library in tests/ and python/tests).
var testDev = func() *strata.Device {
	d, err := strata.Open(strata.Options{Backend: "cpu"})
	if err != nil {
		panic(err)
	}
	return d
}()
