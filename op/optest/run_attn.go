package optest

import (
	"slices"
	"testing"

	"github.com/stratakernels/strata/op"
)

// RunAttention runs op.Attention against RefAttention:
//   - "<case>/dense" for every AttentionCase, with lse, and with three cache rows of large
//     values past Pos0+T (later rows must be ignored);
//   - "<case>/no_lse" for the T = 3 cases (LSE absent);
//   - "<case>/listed" with AttentionCase.Selection for the small-dim and T = 65 cases;
//   - "qsa/<case>" for every QSACase: QSAIndex and the attention that consumes its selection in
//     one Pass (the token tensor never leaves the device), the selection checked as in
//     RunQSAIndex and the attention against RefAttention over the backend's selection;
//   - "qsa_2pass/<case>": the same with the attention in a second Pass (the selection stays in
//     its device tensor between them; the timing mode times the attention alone so).
func RunAttention(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "Attention")
	for _, c := range AttentionCases() {
		type variant struct {
			name     string
			lse, sel bool
		}
		vs := []variant{{"dense", true, false}}
		if c.T == 3 {
			vs = append(vs, variant{"no_lse", false, false})
		}
		if c.D == 13 || c.T == 65 {
			vs = append(vs, variant{"listed", true, true})
		}
		for _, v := range vs {
			s.run(t, c.Name+"/"+v.name, c.Short, func(t *testing.T) {
				q, k, v3 := c.Inputs()
				p := c.Params()
				row := c.Hkv * c.D
				junk := Floats(c.Seed+1<<20, 3*row, 100)
				e := newEnv(t, be)
				a := op.Attention{O: e.out("o", len(q)), Q: e.f32(q), K: e.f32(slices.Concat(k, junk)), V: e.f32(slices.Concat(v3, junk)), P: p}
				if v.lse {
					a.LSE = e.out("lse", c.T*c.Hq)
				}
				var sel *op.Selection
				if v.sel {
					sel = c.Selection()
					a.Sel = &op.Selection{T: sel.T, Dense: sel.Dense, Offsets: sel.Offsets}
					a.Tok = e.i32(sel.Tokens)
				}
				e.pass(func(ps op.Pass) error { return ps.Attention(a) })
				wo, wl := RefAttention(q, k, v3, p, sel)
				s.close(t, "o", f32s(a.O), wo)
				if v.lse {
					s.close(t, "lse", f32s(a.LSE), wl)
				}
			})
		}
	}
	s.runEntries(t, be, attentionEntries())
	good := op.AttnParams{T: 3, Hq: 4, Hkv: 2, D: 8, Pos0: 2, Scale: 0.25}
	nq, nkv := 3*4*8, 5*2*8
	layout := func(dense []bool, offsets []int32) *op.Selection {
		return &op.Selection{T: len(dense), Dense: dense, Offsets: offsets}
	}
	runBad(t, s, be, func(e *env) op.Attention {
		return op.Attention{O: e.out("o", nq), LSE: e.out("lse", 12), Q: e.f32(Floats(1, nq, 1)), K: e.f32(Floats(2, nkv, 1)),
			V: e.f32(Floats(3, nkv, 1)), P: good, Sel: layout([]bool{true, false, false}, []int32{0, 0, 2, 4}), Tok: e.i32([]int32{0, 3, 1, 4})}
	}, op.Pass.Attention, []badCase[op.Attention]{
		{"T_zero", errShape, func(e *env, a *op.Attention) { a.P.T = 0 }},
		{"D_zero", errShape, func(e *env, a *op.Attention) { a.P.D = 0 }},
		{"HPG_not_integer", errArg, func(e *env, a *op.Attention) { a.P.Hq = 3 }},
		{"negative_pos0", errArg, func(e *env, a *op.Attention) { a.P.Pos0 = -1 }},
		{"zero_scale", errArg, func(e *env, a *op.Attention) { a.P.Scale = 0 }},
		{"NaN_scale", errArg, func(e *env, a *op.Attention) { a.P.Scale = nan32 }},
		{"short_q", errShape, func(e *env, a *op.Attention) { a.Q = e.shorter(a.Q, 1) }},
		{"short_o", errShape, func(e *env, a *op.Attention) { a.O = e.shorter(a.O, 8) }},
		{"short_lse", errShape, func(e *env, a *op.Attention) { a.LSE = e.shorter(a.LSE, 1) }},
		{"short_k", errShape, func(e *env, a *op.Attention) { a.K = e.shorter(a.K, 16) }},
		{"ragged_v", errShape, func(e *env, a *op.Attention) { a.V = e.shorter(a.V, -3) }},
		{"q_I32", errDType, func(e *env, a *op.Attention) { a.Q = e.retyped(a.Q) }},
		{"missing_k", errArg, func(e *env, a *op.Attention) { a.K = noTensor }},
		{"tokens_F32", errDType, func(e *env, a *op.Attention) { a.Tok = e.retyped(a.Tok) }},
		{"selection_without_tokens", errArg, func(e *env, a *op.Attention) { a.Tok = noTensor }},
		{"tokens_without_selection", errArg, func(e *env, a *op.Attention) { a.Sel = nil }},
		{"selection_T", errArg, func(e *env, a *op.Attention) { a.Sel = layout([]bool{true, false}, []int32{0, 0, 4}) }},
		{"short_Dense", errArg, func(e *env, a *op.Attention) {
			a.Sel = &op.Selection{T: 3, Dense: []bool{true}, Offsets: []int32{0, 0, 2, 4}}
		}},
		{"offsets_past_tokens", errArg, func(e *env, a *op.Attention) { a.Sel = layout([]bool{true, false, false}, []int32{0, 0, 2, 5}) }},
		{"decreasing_offsets", errArg, func(e *env, a *op.Attention) { a.Sel = layout([]bool{false, false, false}, []int32{0, 3, 2, 4}) }},
		{"empty_sparse_row", errArg, func(e *env, a *op.Attention) {
			a.Sel, a.Tok = layout([]bool{true, false, false}, []int32{0, 0, 0, 2}), e.i32([]int32{1, 4})
		}},
		{"dense_row_with_tokens", errArg, func(e *env, a *op.Attention) {
			a.Sel, a.Tok = layout([]bool{true, true, true}, []int32{0, 1, 1, 1}), e.i32([]int32{0})
		}},
		{"value_token_beyond_causal_limit", errArg, func(e *env, a *op.Attention) { a.Tok = e.i32([]int32{0, 4, 1, 4}) }},
		{"value_negative_token", errArg, func(e *env, a *op.Attention) { a.Tok = e.i32([]int32{-1, 3, 1, 4}) }},
		{"value_tokens_not_ascending", errArg, func(e *env, a *op.Attention) { a.Tok = e.i32([]int32{3, 0, 1, 4}) }},
		{"value_duplicate_token", errArg, func(e *env, a *op.Attention) { a.Tok = e.i32([]int32{3, 3, 1, 4}) }},
	})
}

// attentionEntries are the attention cases over the indexer's selection: "qsa/" and
// "qsa_2pass/" of every QSACase.
func attentionEntries() []entry {
	var es []entry
	for _, c := range QSACases() {
		es = append(es, qsaAttentionEntry(c, false), qsaAttentionEntry(c, true))
	}
	return es
}

// qsaAttentionEntry is the attention over the selection of QSACase c's indexer, with QSAIndex in
// the same Pass or, with twoPass, in a Pass of its own first; flops count Q K^T and P V over the
// keys each row attends (op.QSAPlan: every key of a dense row, the selected ones of a sparse
// row).
func qsaAttentionEntry(c QSACase, twoPass bool) entry {
	name := "qsa/" + c.Name
	if twoPass {
		name = "qsa_2pass/" + c.Name
	}
	plan := op.QSAPlan(c.Params())
	var keys float64
	for t := 0; t < c.T; t++ {
		if plan.Dense[t] {
			keys += float64(c.Pos0 + t + 1)
		} else {
			keys += float64(plan.Offsets[t+1] - plan.Offsets[t])
		}
	}
	return entry{name: name, short: c.Short, flops: 4 * float64(c.Hq*c.D) * keys,
		build: func(e *env) (func(op.Pass) error, func(*testing.T, *suite)) {
			iq, _, _, q, k, v := c.Inputs()
			p := c.AttnParams()
			O, LSE := e.out("o", len(q)), e.out("lse", c.T*c.Hq)
			run := newQSAIndex(e, c, iq)
			a := op.Attention{O: O, LSE: LSE, Q: e.f32(q), K: e.f32(k), V: e.f32(v), P: p, Sel: run.plan, Tok: run.tok}
			index := func(ps op.Pass) error { return ps.QSAIndex(run.args) }
			call := func(ps op.Pass) error {
				if err := index(ps); err != nil {
					return err
				}
				return ps.Attention(a)
			}
			if twoPass {
				e.pass(index)
				call = func(ps op.Pass) error { return ps.Attention(a) }
			}
			return call, func(t *testing.T, s *suite) {
				sel := run.check(t, s, c)
				wo, wl := RefAttention(q, k, v, p, sel)
				s.close(t, "o", f32s(O), wo)
				s.close(t, "lse", f32s(LSE), wl)
			}
		}}
}
