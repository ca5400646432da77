package optest

import (
	"math"
	"slices"
	"testing"

	"github.com/stratakernels/strata/op"
)

// Invariants of the references, independent of any backend.

func maxAbsDiff(a, b []float64) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

func TestRelErr(t *testing.T) {
	for _, c := range []struct {
		got  []float32
		want []float64
		rel  float64
	}{
		{[]float32{1, 2}, []float64{1, 2}, 0},
		{[]float32{1, 2.5}, []float64{1, 2}, 0.25},
		{[]float32{0.5}, []float64{0}, 0.5}, // all-zero want: absolute
		{[]float32{float32(math.NaN())}, []float64{1}, math.Inf(1)},
		{[]float32{float32(math.Inf(1))}, []float64{1}, math.Inf(1)},
		{nil, nil, 0},
	} {
		if r := RelErr(c.got, c.want); r != c.rel {
			t.Errorf("RelErr(%v, %v) = %g, want %g", c.got, c.want, r, c.rel)
		}
	}
}

// One visible key: the output is its value row and lse its scaled score.
func TestRefAttentionOneKey(t *testing.T) {
	p := op.AttnParams{T: 1, Hq: 3, Hkv: 1, D: 5, Scale: 0.5}
	q, k, v := Floats(1, 15, 1), Floats(2, 5, 1), Floats(3, 5, 1)
	o, lse := RefAttention(q, k, v, p, nil)
	for h := 0; h < 3; h++ {
		var s float64
		for j := 0; j < 5; j++ {
			s += float64(q[h*5+j]) * float64(k[j])
			if o[h*5+j] != float64(v[j]) {
				t.Fatalf("head %d: o %v, want v %v", h, o[h*5:h*5+5], v)
			}
		}
		if math.Abs(lse[h]-0.5*s) > 1e-15 {
			t.Fatalf("head %d: lse %g, want %g", h, lse[h], 0.5*s)
		}
	}
	// A selection listing every position is dense attention.
	c := AttentionCases()[13]
	q, k, v = c.Inputs()
	sel := &op.Selection{T: c.T, Dense: make([]bool, c.T), Offsets: make([]int32, c.T+1)}
	for r := 0; r < c.T; r++ {
		for s := 0; s <= c.Pos0+r; s++ {
			sel.Tokens = append(sel.Tokens, int32(s))
		}
		sel.Offsets[r+1] = int32(len(sel.Tokens))
	}
	o1, l1 := RefAttention(q, k, v, c.Params(), nil)
	o2, l2 := RefAttention(q, k, v, c.Params(), sel)
	if !slices.Equal(o1, o2) || !slices.Equal(l1, l2) {
		t.Fatal("full listed selection differs from dense attention")
	}
}

// Position 0 is the identity; a rotation keeps the norm of each rotated pair.
func TestRefRoPE(t *testing.T) {
	x := To64(Floats(4, 2*3*8, 1))
	if y := RefRoPE(x, 2, 3, 8, 6, []float64{0, 0}, 1e4); maxAbsDiff(x, y) != 0 {
		t.Fatal("RoPE at position 0 changed x")
	}
	y := RefRoPE(x, 2, 3, 8, 6, []float64{17, 4000}, 1e4)
	for r := 0; r < 6; r++ {
		for j := 0; j < 3; j++ {
			a := math.Hypot(x[r*8+j], x[r*8+j+3])
			b := math.Hypot(y[r*8+j], y[r*8+j+3])
			if math.Abs(a-b) > 1e-14 {
				t.Fatalf("row %d pair %d: norm %g -> %g", r, j, a, b)
			}
		}
		if !slices.Equal(x[r*8+6:r*8+8], y[r*8+6:r*8+8]) {
			t.Fatalf("row %d: dims past rot changed", r)
		}
	}
}

func TestRefRMSNorm1p(t *testing.T) {
	x := To64(Floats(5, 3*16, 2))
	y := RefRMSNorm1p(x, 1, 16, make([]float32, 16), 0)
	for r := 0; r < 3; r++ {
		var ms float64
		for _, v := range y[r*16 : (r+1)*16] {
			ms += v * v / 16
		}
		if math.Abs(ms-1) > 1e-14 {
			t.Fatalf("row %d: mean square %g, want 1", r, ms)
		}
	}
}

func TestRefTopKRoute(t *testing.T) {
	w, idx, _ := RefTopKRoute([]float32{1, 3, 3, 0, 3, 1}, 1, 6, 4, true)
	if !slices.Equal(idx, []int32{1, 2, 4, 0}) {
		t.Fatalf("tie order %v", idx)
	}
	var s float64
	for _, v := range w {
		s += v
	}
	if math.Abs(s-1) > 1e-15 || w[0] != w[1] || w[1] != w[2] {
		t.Fatalf("weights %v", w)
	}
}

// The references of the stateful ops give the same result over two chunks as over one.
func TestRefChunksEqualWhole(t *testing.T) {
	c := GDNCases()[8] // r1_dk12_dv20, T = 65
	in, p := c.Inputs(), c.Params()
	whole := RefGDNPre(p, in.QKV, in.A, in.B, in.ConvState, in.ConvW, in.ALog, in.DtBias)
	C := c.Channels()
	p1, p2 := p, p
	p1.T, p2.T = 2, c.T-2
	a := RefGDNPre(p1, in.QKV[:2*C], in.A[:2*c.Hv], in.B[:2*c.Hv], in.ConvState, in.ConvW, in.ALog, in.DtBias)
	b := RefGDNPre(p2, in.QKV[2*C:], in.A[2*c.Hv:], in.B[2*c.Hv:], round32(a.ConvState), in.ConvW, in.ALog, in.DtBias)
	if d := maxAbsDiff(whole.Q, append(a.Q, b.Q...)); d != 0 {
		t.Fatalf("gdn_pre q: split differs by %g", d)
	}
	if !slices.Equal(whole.ConvState, b.ConvState) {
		t.Fatal("gdn_pre: conv state after the split differs")
	}

	q, k := gdnScanInputs(c, in)
	Q, K, V, G, B, S := To64(q), To64(k), To64(in.V), To64(in.G), To64(in.Beta), To64(in.State)
	o, st := RefGDNScan(p, Q, K, V, G, B, S)
	qk, vd := c.Hk*c.Dk, c.Hv*c.Dv
	o1, st1 := RefGDNScan(p1, Q[:2*qk], K[:2*qk], V[:2*vd], G[:2*c.Hv], B[:2*c.Hv], S)
	o2, st2 := RefGDNScan(p2, Q[2*qk:], K[2*qk:], V[2*vd:], G[2*c.Hv:], B[2*c.Hv:], st1)
	if d := max(maxAbsDiff(o, append(o1, o2...)), maxAbsDiff(st, st2)); d != 0 {
		t.Fatalf("gdn_scan: split differs by %g", d)
	}

	pc := PLECases()[len(PLECases())-2]
	w := &op.PLEWeights{S: pc.S, D: pc.D, EmbedDim: pc.Heads * pc.HeadDim, HeadDim: pc.HeadDim, Dilation: pc.Dilation,
		NormKey: Floats(1, pc.S*pc.D, 0.3), NormQuery: Floats(2, pc.S*pc.D, 0.3), NormConv: Floats(3, pc.S*pc.D, 0.3),
		ConvW: Floats(4, pc.S*pc.D*pc.ConvK, 0.5)}
	var err error
	if w.Table, _, err = RandMatrix(5, pc.Rows, pc.HeadDim, op.F32, 1); err == nil {
		if w.Key, _, err = RandMatrix(6, pc.S*pc.D, w.EmbedDim, op.F32, 0.2); err == nil {
			w.Value, _, err = RandMatrix(7, pc.D, w.EmbedDim, op.F32, 0.2)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	C = pc.S * pc.D
	H := Floats(8, pc.T*C, 2)
	ids := Tokens(9, pc.T*pc.Heads, pc.Rows, 0, 0)
	st0 := Floats(10, w.ConvStateLen(), 1)
	hw, sw := RefPLEApply(H, pc.T, ids, w, st0, eps)
	sp := pc.Split
	h1, s1 := RefPLEApply(H[:sp*C], sp, ids[:sp*pc.Heads], w, st0, eps)
	h2, s2 := RefPLEApply(H[sp*C:], pc.T-sp, ids[sp*pc.Heads:], w, round32(s1), eps)
	if d := max(maxAbsDiff(hw, append(h1, h2...)), maxAbsDiff(sw, s2)); d > 1e-6 {
		t.Fatalf("PLE: split differs by %g", d)
	}
}

// RefMoEExperts lays slots out by expert, then slot order, and skips empty slots.
func TestRefMoEExpertsLayout(t *testing.T) {
	gu, _, err := RandMatrix(1, 4, 3, op.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	dn, _, err := RandMatrix(2, 3, 2, op.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	ex := &op.Experts{E: 3, D: 3, I: 2, GateUp: []*op.Matrix{gu, gu, gu}, Down: []*op.Matrix{dn, dn, dn}}
	idx := []int32{2, 0, -1, 2, 0, 1}
	ye, rk := RefMoEExperts(Floats(3, 9, 1), 3, 2, idx, ex)
	if want := []int32{3, 0, -1, 4, 1, 2}; !slices.Equal(rk, want) {
		t.Fatalf("rk %v, want %v", rk, want)
	}
	if !slices.Equal(ye[5*3:], []float64{0, 0, 0}) {
		t.Fatal("unused row not zero")
	}
}
