package optest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stratakernels/strata/op"
)

// RunQSAPrep runs QSAPrepCases through Pass.QSAPrep against RefQSAPrep (qg, k, v seeded Seed..
// Seed+2, the norms Seed+3, Seed+4 at scale 0.1, the caches holding Seed+5, Seed+6 and two rows
// past Pos0+T): Gate and the new V rows must be exact copies, the cache rows outside
// Pos0..Pos0+T-1 untouched.
func RunQSAPrep(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "QSAPrep")
	s.runEntries(t, be, qsaPrepEntries())
	const T, Hq, Hkv, D, pos0 = 2, 4, 2, 8, 3
	runBad(t, s, be, func(e *env) op.QSAPrep {
		return op.QSAPrep{Q: e.out("q", T*Hq*D), Gate: e.out("gate", T*Hq*D), KC: e.f32(make([]float32, (pos0+T)*Hkv*D)),
			VC: e.f32(make([]float32, (pos0+T)*Hkv*D)), QG: e.f32(Floats(1, T*Hq*2*D, 1)), K: e.f32(Floats(2, T*Hkv*D, 1)),
			V: e.f32(Floats(3, T*Hkv*D, 1)), QNorm: make([]float32, D), KNorm: make([]float32, D),
			T: T, Hq: Hq, Hkv: Hkv, D: D, Rot: 4, Pos0: pos0, Theta: 1e4, Eps: eps}
	}, op.Pass.QSAPrep, []badCase[op.QSAPrep]{
		{"odd_rot", errArg, func(e *env, a *op.QSAPrep) { a.Rot = 3 }},
		{"rot_above_D", errArg, func(e *env, a *op.QSAPrep) { a.Rot = 10 }},
		{"theta_zero", errArg, func(e *env, a *op.QSAPrep) { a.Theta = 0 }},
		{"negative_pos0", errArg, func(e *env, a *op.QSAPrep) { a.Pos0 = -1 }},
		{"T_zero", errShape, func(e *env, a *op.QSAPrep) { a.T = 0 }},
		{"short_qg", errShape, func(e *env, a *op.QSAPrep) { a.QG = e.shorter(a.QG, 1) }},
		{"short_k_cache", errShape, func(e *env, a *op.QSAPrep) { a.KC = e.shorter(a.KC, 1) }},
		{"short_qNorm", errShape, func(e *env, a *op.QSAPrep) { a.QNorm = a.QNorm[1:] }},
		{"eps_negative", errArg, func(e *env, a *op.QSAPrep) { a.Eps = -1 }},
		{"gate_I32", errDType, func(e *env, a *op.QSAPrep) { a.Gate = e.retyped(a.Gate) }},
		{"missing_v", errArg, func(e *env, a *op.QSAPrep) { a.V = noTensor }},
	})
}

// qsaPrepEntries are the QSAPrep table: every QSAPrepCase.
func qsaPrepEntries() []entry {
	var es []entry
	for _, c := range QSAPrepCases() {
		es = append(es, qsaPrepEntry(c))
	}
	return es
}

// qsaPrepEntry is one QSAPrep case (see RunQSAPrep).
func qsaPrepEntry(c QSAPrepCase) entry {
	T, Hq, Hkv, D := c.T, c.Hq, c.Hkv, c.D
	return entry{name: c.Name(), short: c.Short, bytes: 4 * float64(T) * float64(D) * float64(4*Hq+4*Hkv),
		build: func(e *env) (func(op.Pass) error, func(*testing.T, *suite)) {
			qg, k, v := Floats(c.Seed, T*Hq*2*D, 1), Floats(c.Seed+1, T*Hkv*D, 1), Floats(c.Seed+2, T*Hkv*D, 1)
			qNorm, kNorm := Floats(c.Seed+3, D, 0.1), Floats(c.Seed+4, D, 0.1)
			rows := c.Pos0 + T + 2
			kc0, vc0 := Floats(c.Seed+5, rows*Hkv*D, 1), Floats(c.Seed+6, rows*Hkv*D, 1)
			Q, Gate, KC, VC := e.out("q", T*Hq*D), e.out("gate", T*Hq*D), e.f32(kc0), e.f32(vc0)
			a := op.QSAPrep{Q: Q, Gate: Gate, KC: KC, VC: VC, QG: e.f32(qg), K: e.f32(k), V: e.f32(v),
				QNorm: qNorm, KNorm: kNorm, T: T, Hq: Hq, Hkv: Hkv, D: D, Rot: c.Rot, Pos0: c.Pos0, Theta: c.Theta, Eps: eps}
			return func(p op.Pass) error { return p.QSAPrep(a) }, func(t *testing.T, s *suite) {
				wq, wgate, wk := RefQSAPrep(qg, k, qNorm, kNorm, T, Hq, Hkv, D, c.Rot, c.Pos0, c.Theta, eps)
				s.close(t, "q", f32s(Q), wq)
				exactF32(t, "gate", f32s(Gate), round32(wgate))
				lo, hi := c.Pos0*Hkv*D, (c.Pos0+T)*Hkv*D
				kc := f32s(KC)
				s.close(t, "k", kc[lo:hi], wk)
				exactF32(t, "k cache outside the new rows", append(kc[:lo:lo], kc[hi:]...), append(kc0[:lo:lo], kc0[hi:]...))
				exactF32(t, "v cache", f32s(VC), slices.Concat(vc0[:lo], v, vc0[hi:]))
			}
		}}
}

// qsaIndexRun is one QSAIndex call of a case: its arguments, the expected key cache and the
// reference queries.
type qsaIndexRun struct {
	args     op.QSAIndex
	plan     *op.Selection
	tok      op.Tensor
	wantKeys []float32
	iqRef    []float64
}

// newQSAIndex allocates case c's QSAIndex (queries iq, raw keys and norms from the case; the key
// cache holding rows 0..Pos0-1 and two rows past Pos0+T-1).
func newQSAIndex(e *env, c QSACase, iq []float32) qsaIndexRun {
	_, raw, kNorm, _, _, _ := c.Inputs()
	qNorm, ip := c.QNorm(), c.Params()
	nh, dim := c.NHeads, c.Dim
	iqk := make([]float32, 0, c.T*(nh+1)*dim)
	for t := 0; t < c.T; t++ {
		iqk = append(iqk, iq[t*nh*dim:(t+1)*nh*dim]...)
		iqk = append(iqk, raw[(c.Pos0+t)*dim:(c.Pos0+t+1)*dim]...)
	}
	tail := Floats(c.Seed+8, 2*dim, 1)
	keys0 := slices.Concat(raw[:c.Pos0*dim], make([]float32, c.T*dim), tail)
	for i := c.Pos0 * dim; i < (c.Pos0+c.T)*dim; i++ {
		keys0[i] = canaryF32
	}
	r := qsaIndexRun{plan: op.QSAPlan(ip), wantKeys: slices.Concat(raw, tail)}
	r.tok = e.outI32("tok", int(r.plan.Offsets[c.T]))
	r.args = op.QSAIndex{Plan: r.plan, Tok: r.tok, IQ: e.out("iq", c.T*nh*dim), Keys: e.f32(keys0), IQK: e.f32(iqk),
		QNorm: qNorm, KNorm: kNorm, P: ip}
	pos := make([]float64, c.T)
	for t := range pos {
		pos[t] = float64(c.Pos0 + t)
	}
	r.iqRef = RefRoPE(RefRMSNorm1p(To64(iq), 1, dim, qNorm, float64(c.Eps)), c.T, nh, dim, c.Rot, pos, c.Theta)
	return r
}

// check compares the outputs of a committed QSAIndex with the references and returns the
// backend's selection.
func (r qsaIndexRun) check(t *testing.T, s *suite, c QSACase) *op.Selection {
	t.Helper()
	_, raw, kNorm, _, _, _ := c.Inputs()
	exactF32(t, "index keys", f32s(r.args.Keys), r.wantKeys)
	if s.op == "QSAIndex" {
		s.close(t, "iq", f32s(r.args.IQ), r.iqRef)
	}
	sel := &op.Selection{T: r.plan.T, Dense: r.plan.Dense, Offsets: r.plan.Offsets, Tokens: i32s(r.tok)}
	swaps := compareSelection(t, sel, refQSASelect(r.iqRef, raw, kNorm, c.Params()), c.Params(), s.o.tol("QSAIndex", "tie"))
	if swaps > 0 {
		t.Logf("%d near-tie block swaps", swaps)
	}
	return sel
}

// RunQSAIndex runs QSACases through Pass.QSAIndex: the prepared queries against RefRoPE of
// RefRMSNorm1p, the raw keys appended to the cache exactly, and the selection against the
// float64 indexer (blocks within the "tie" tolerance of a row's cut-off may swap). A last case
// zeroes the queries of QSACases()[5]: every score is exactly 0 and each sparse row must keep
// its lowest blocks.
func RunQSAIndex(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "QSAIndex")
	s.runEntries(t, be, qsaIndexEntries())
	ip := op.IndexerParams{T: 2, Pos0: 6, NHeads: 2, Dim: 8, Ratio: 2, Budget: 4, Rot: 4, Theta: 1e4, Eps: 1e-6}
	other := ip
	other.Pos0 = 5
	runBad(t, s, be, func(e *env) op.QSAIndex {
		plan := op.QSAPlan(ip)
		return op.QSAIndex{Plan: plan, Tok: e.outI32("tok", int(plan.Offsets[ip.T])), IQ: e.out("iq", 2*2*8),
			Keys: e.f32(Floats(1, 8*8, 1)), IQK: e.f32(Floats(2, 2*3*8, 1)), QNorm: make([]float32, 8), KNorm: make([]float32, 8), P: ip}
	}, op.Pass.QSAIndex, []badCase[op.QSAIndex]{
		{"nil_plan", errArg, func(e *env, a *op.QSAIndex) { a.Plan = nil }},
		{"plan_of_other_params", errArg, func(e *env, a *op.QSAIndex) { a.Plan = op.QSAPlan(other) }},
		{"rot_zero", errArg, func(e *env, a *op.QSAIndex) { a.P.Rot = 0 }},
		{"budget_below_block", errArg, func(e *env, a *op.QSAIndex) { a.P.Budget = 1 }},
		{"T_zero", errShape, func(e *env, a *op.QSAIndex) { a.P.T = 0 }},
		{"negative_pos0", errArg, func(e *env, a *op.QSAIndex) { a.P.Pos0 = -1 }},
		{"short_iqk", errShape, func(e *env, a *op.QSAIndex) { a.IQK = e.shorter(a.IQK, 1) }},
		{"short_keys", errShape, func(e *env, a *op.QSAIndex) { a.Keys = e.shorter(a.Keys, 9) }},
		{"long_tok", errShape, func(e *env, a *op.QSAIndex) { a.Tok = e.shorter(a.Tok, -1) }},
		{"short_kNorm", errShape, func(e *env, a *op.QSAIndex) { a.KNorm = a.KNorm[1:] }},
		{"tok_F32", errDType, func(e *env, a *op.QSAIndex) { a.Tok = e.retyped(a.Tok) }},
	})
}

// qsaIndexEntries are the QSAIndex table: every QSACase, then QSACases()[5] with zero queries.
func qsaIndexEntries() []entry {
	cs := QSACases()
	var es []entry
	for _, c := range cs {
		es = append(es, qsaIndexEntry(c.Name, c.Short, c, false))
	}
	return append(es, qsaIndexEntry("ties_zero_queries_"+cs[5].Name, true, cs[5], true))
}

// qsaIndexEntry is one QSAIndex case: the queries of c.Inputs (zeros with zeroQ: every sparse
// row must then keep its lowest blocks).
func qsaIndexEntry(name string, short bool, c QSACase, zeroQ bool) entry {
	var blocks float64
	for t := 0; t < c.T; t++ {
		blocks += float64((c.Pos0 + t + 1) / c.Ratio)
	}
	return entry{name: name, short: short, flops: 2 * blocks * float64(c.NHeads*c.Dim),
		build: func(e *env) (func(op.Pass) error, func(*testing.T, *suite)) {
			iq, _, _, _, _, _ := c.Inputs()
			if zeroQ {
				iq = make([]float32, len(iq))
			}
			run := newQSAIndex(e, c, iq)
			return func(p op.Pass) error { return p.QSAIndex(run.args) }, func(t *testing.T, s *suite) {
				sel := run.check(t, s, c)
				if zeroQ {
					checkLowestBlocks(t, sel, c.Params())
				}
			}
		}}
}

// checkLowestBlocks requires every sparse row of sel to list blocks 0..Budget/Ratio-1, then its
// tail (the tie rule when every score is equal).
func checkLowestBlocks(t *testing.T, sel *op.Selection, p op.IndexerParams) {
	t.Helper()
	sparse := 0
	for r := 0; r < p.T; r++ {
		if sel.Dense[r] {
			continue
		}
		sparse++
		pos := p.Pos0 + r
		var want []int32
		for tok := 0; tok < p.Budget/p.Ratio*p.Ratio; tok++ {
			want = append(want, int32(tok))
		}
		for tok := (pos + 1) / p.Ratio * p.Ratio; tok <= pos; tok++ {
			want = append(want, int32(tok))
		}
		exactI32(t, fmt.Sprintf("row %d", r), sel.Tokens[sel.Offsets[r]:sel.Offsets[r+1]], want)
	}
	if sparse == 0 {
		t.Fatal("the case has no sparse rows")
	}
}

// compareSelection checks a selection against the reference rows. Blocks whose float64 scores
// lie within tie (relative) of the row's cut-off may swap (float32 scoring of a near tie); any
// other difference fails. It returns the number of such swaps.
func compareSelection(t *testing.T, sel *op.Selection, ref []qsaRefRow, p op.IndexerParams, tie float64) int {
	t.Helper()
	if err := sel.CheckTokens("selection", p.T, p.Pos0, sel.Tokens); err != nil {
		t.Fatalf("selection does not validate: %v", err)
	}
	swaps := 0
	for r, want := range ref {
		if sel.Dense[r] != want.dense {
			t.Fatalf("row %d: dense %v, want %v", r, sel.Dense[r], want.dense)
		}
		if want.dense {
			continue
		}
		got := sel.Tokens[sel.Offsets[r]:sel.Offsets[r+1]]
		if len(got) != len(want.tokens) {
			t.Fatalf("row %d: %d tokens, want %d", r, len(got), len(want.tokens))
		}
		if slices.Equal(got, want.tokens) {
			continue
		}
		gotBlocks := map[int]bool{}
		for i, tok := range got {
			if int(tok) >= len(want.scores)*p.Ratio { // the tail
				if tok != want.tokens[i] {
					t.Fatalf("row %d: tail token %d, want %d", r, tok, want.tokens[i])
				}
				continue
			}
			b := int(tok) / p.Ratio
			if int(tok)%p.Ratio == 0 {
				if i+p.Ratio > len(got) || got[i+p.Ratio-1] != tok+int32(p.Ratio-1) {
					t.Fatalf("row %d: block %d not listed whole", r, b)
				}
				gotBlocks[b] = true
			}
		}
		wantBlocks := map[int]bool{}
		for _, b := range want.blocks {
			wantBlocks[b] = true
		}
		lim := tie * math.Max(1, math.Abs(want.kth))
		for b := range gotBlocks {
			if !wantBlocks[b] {
				if math.Abs(want.scores[b]-want.kth) > lim {
					t.Fatalf("row %d: block %d (score %.9g) selected, cut-off %.9g", r, b, want.scores[b], want.kth)
				}
				swaps++
			}
		}
		for b := range wantBlocks {
			if !gotBlocks[b] && math.Abs(want.scores[b]-want.kth) > lim {
				t.Fatalf("row %d: block %d (score %.9g) missing, cut-off %.9g", r, b, want.scores[b], want.kth)
			}
		}
	}
	return swaps
}
