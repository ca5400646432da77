package optest

import (
	"fmt"
	"testing"

	"github.com/stratakernels/strata/op"
)

// grWeights builds a GRCase's module from seed: Norm Floats(seed, 0.3), Down (seed+1, 0.05), Up
// (seed+2, 0.2), Inj (seed+3, 0.05) in the case's dtype.
func grWeights(t tb, c GRCase, seed uint64) *op.GRWeights {
	S, D, R := c.S, c.D, c.R
	g := &op.GRWeights{S: S, D: D, R: R, Norm: Floats(seed, S*D, 0.3)}
	g.Down = mustMatrix(t, seed+1, R, S*D, c.DType, 0.05)
	g.Up = mustMatrix(t, seed+2, S*D, R, c.DType, 0.2)
	if c.Inject {
		g.Inj = mustMatrix(t, seed+3, S, S*D, c.DType, 0.05)
	}
	return g
}

// RunGRRead runs GRCases through Pass.GRRead against RefGRRead (weights seeded 900+10i, H
// 950+i): from the raw streams, and Normed from the reference's grouped norm rounded to
// float32. Cases without Inject are the final mixer (no beta). Then QGRCases (weights
// 23000+10i, H 23500+i) with quantized Down, Up and Inj.
func RunGRRead(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "GRRead")
	s.runEntries(t, be, grReadEntries())
	g := grWeights(t, GRCase{S: 2, D: 8, R: 3, Inject: true, DType: op.F32}, 1)
	mixer := *g
	mixer.Inj = nil
	badUp := *g
	badUp.Up = g.Down
	runBad(t, s, be, func(e *env) op.GRRead {
		return op.GRRead{X: e.out("x", 2*8), Beta: e.out("beta", 2*2), H: e.f32(Floats(2, 2*16, 1)), T: 2, G: g, Eps: eps}
	}, op.Pass.GRRead, []badCase[op.GRRead]{
		{"nil_weights", errArg, func(e *env, a *op.GRRead) { a.G = nil }},
		{"up_shape", errShape, func(e *env, a *op.GRRead) { a.G = &badUp }},
		{"short_H", errShape, func(e *env, a *op.GRRead) { a.H = e.shorter(a.H, 1) }},
		{"short_x", errShape, func(e *env, a *op.GRRead) { a.X = e.shorter(a.X, 1) }},
		{"missing_beta", errArg, func(e *env, a *op.GRRead) { a.Beta = noTensor }},
		{"beta_without_inject", errArg, func(e *env, a *op.GRRead) { a.G = &mixer }},
		{"short_beta", errShape, func(e *env, a *op.GRRead) { a.Beta = e.shorter(a.Beta, 1) }},
		{"negative_T", errShape, func(e *env, a *op.GRRead) { a.T = -1 }},
		{"eps_NaN", errArg, func(e *env, a *op.GRRead) { a.Eps = nan32 }},
		{"H_I32", errDType, func(e *env, a *op.GRRead) { a.H = e.retyped(a.H) }},
	})
}

// grReadEntries are the GRRead table: GRCases, then QGRCases, each from the raw and from the
// normalised streams.
func grReadEntries() []entry {
	var es []entry
	for i, c := range GRCases() {
		for _, normed := range []bool{false, true} {
			es = append(es, grReadEntry(fmt.Sprintf("%s/normed%v", c.Name(), normed), c.Short, c, Quant{}, uint64(900+10*i), uint64(950+i), normed))
		}
	}
	for i, c := range QGRCases() {
		for _, normed := range []bool{false, true} {
			es = append(es, grReadEntry(fmt.Sprintf("%s/normed%v", c.Name(), normed), c.Short, c.GR, c.Q, uint64(23000+10*i), uint64(23500+i), normed))
		}
	}
	return es
}

// grReadEntry is one GRRead case: weights grWeights(c, wSeed) (with q set: Down, Up and Inj
// quantized by q at the same seeds), H Floats(hSeed, 2) (normalised first when normed).
func grReadEntry(name string, short bool, c GRCase, q Quant, wSeed, hSeed uint64, normed bool) entry {
	S, D, R, T := float64(c.S), float64(c.D), float64(c.R), float64(c.T)
	flops := 2 * T * 2 * R * S * D
	if c.Inject {
		flops += 2 * T * S * S * D
	}
	return entry{name: name, short: short, quant: q.Bits > 0, flops: flops, build: func(e *env) (func(op.Pass) error, func(*testing.T, *suite)) {
		var g *op.GRWeights
		if q.Bits > 0 {
			g = &op.GRWeights{S: c.S, D: c.D, R: c.R, Norm: Floats(wSeed, c.S*c.D, 0.3)}
			g.Down = q.matrix(e.t, wSeed+1, c.R, c.S*c.D, 0.05)
			g.Up = q.matrix(e.t, wSeed+2, c.S*c.D, c.R, 0.2)
			if c.Inject {
				g.Inj = q.matrix(e.t, wSeed+3, c.S, c.S*c.D, 0.05)
			}
		} else {
			g = grWeights(e.t, c, wSeed)
		}
		H := Floats(hSeed, c.T*c.S*c.D, 2)
		if normed {
			H = round32(RefRMSNorm1p(To64(H), c.S, c.D, g.Norm, eps))
		}
		X := e.out("x", c.T*c.D)
		var Beta op.Tensor
		if c.Inject {
			Beta = e.out("beta", c.T*c.S)
		}
		Ht := e.f32(H)
		a := op.GRRead{X: X, Beta: Beta, H: Ht, Normed: normed, T: c.T, G: g, Eps: eps}
		return func(p op.Pass) error { return p.GRRead(a) }, func(t *testing.T, s *suite) {
			wx, wb := RefGRRead(H, normed, c.T, g, eps)
			s.close(t, "x", f32s(X), wx)
			if c.Inject {
				s.close(t, "beta", f32s(Beta), wb)
			}
			exactF32(t, "H (not modified)", f32s(Ht), H)
		}
	}}
}

// RunGRWrite runs CombineCases through Pass.GRWrite, with and without Hn, against RefGRWrite
// and the grouped RefRMSNorm1p of its result (H seeded Seed, beta Seed+1 uniform in [0, 2),
// u Seed+2, norm Seed+3).
func RunGRWrite(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "GRWrite")
	for _, c := range CombineCases() {
		for _, withHn := range []bool{false, true} {
			s.run(t, fmt.Sprintf("%s/Hn%v", c.Name(), withHn), c.Short, func(t *testing.T) {
				S, D, T := c.S, c.D, c.T
				H0, beta := Floats(c.Seed, T*S*D, 2), Uniform(c.Seed+1, T*S, 0, 2)
				u, norm := Floats(c.Seed+2, T*D, 1), Floats(c.Seed+3, S*D, 0.3)
				e := newEnv(t, be)
				H := e.f32(H0)
				a := op.GRWrite{H: H, Beta: e.f32(beta), U: e.f32(u), T: T, S: S, D: D}
				if withHn {
					a.Hn, a.Norm, a.Eps = e.out("Hn", T*S*D), norm, eps
				}
				e.pass(func(p op.Pass) error { return p.GRWrite(a) })
				want := RefGRWrite(H0, beta, To64(u), T, S, D)
				s.close(t, "H", f32s(H), want)
				if withHn {
					s.close(t, "Hn", f32s(a.Hn), RefRMSNorm1p(want, S, D, norm, eps))
				}
			})
		}
	}
	runBad(t, s, be, func(e *env) op.GRWrite {
		return op.GRWrite{H: e.f32(Floats(1, 2*16, 1)), Hn: e.out("Hn", 2*16), Beta: e.f32(Floats(2, 4, 1)),
			U: e.f32(Floats(3, 2*8, 1)), T: 2, S: 2, D: 8, Norm: make([]float32, 16), Eps: eps}
	}, op.Pass.GRWrite, []badCase[op.GRWrite]{
		{"short_u", errShape, func(e *env, a *op.GRWrite) { a.U = e.shorter(a.U, 1) }},
		{"short_beta", errShape, func(e *env, a *op.GRWrite) { a.Beta = e.shorter(a.Beta, 1) }},
		{"short_H", errShape, func(e *env, a *op.GRWrite) { a.H = e.shorter(a.H, 8) }},
		{"short_Hn", errShape, func(e *env, a *op.GRWrite) { a.Hn = e.shorter(a.Hn, 8) }},
		{"short_norm", errShape, func(e *env, a *op.GRWrite) { a.Norm = a.Norm[:8] }},
		{"eps_NaN", errArg, func(e *env, a *op.GRWrite) { a.Eps = nan32 }},
		{"S_zero", errShape, func(e *env, a *op.GRWrite) { a.S = 0 }},
		{"negative_T", errShape, func(e *env, a *op.GRWrite) { a.T = -2 }},
		{"missing_u", errArg, func(e *env, a *op.GRWrite) { a.U = noTensor }},
		{"beta_I32", errDType, func(e *env, a *op.GRWrite) { a.Beta = e.retyped(a.Beta) }},
	})
}

// RunGRApplyMoEC runs CombineCases through Pass.GRApplyMoEC with and without Shared and Hn:
// u = RefMoECombine (+ shared), then RefGRWrite and the grouped norm (inputs as RunGRWrite's
// and combineInputs; shared Seed+5, norm Seed+6).
func RunGRApplyMoEC(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "GRApplyMoEC")
	s.runEntries(t, be, grApplyEntries())
	runBad(t, s, be, func(e *env) op.GRApplyMoEC {
		return op.GRApplyMoEC{H: e.f32(Floats(1, 2*16, 1)), Hn: e.out("Hn", 2*16), Beta: e.f32(Floats(2, 4, 1)),
			YE: e.f32(Floats(3, 3*8, 1)), RK: e.i32([]int32{0, 2, 1, -1}), W: e.f32(Floats(4, 4, 1)),
			Shared: e.f32(Floats(5, 16, 1)), T: 2, S: 2, K: 2, D: 8, Norm: make([]float32, 16), Eps: eps}
	}, op.Pass.GRApplyMoEC, []badCase[op.GRApplyMoEC]{
		{"ragged_ye", errShape, func(e *env, a *op.GRApplyMoEC) { a.YE = e.shorter(a.YE, 3) }},
		{"short_rk", errShape, func(e *env, a *op.GRApplyMoEC) { a.RK = e.shorter(a.RK, 1) }},
		{"short_w", errShape, func(e *env, a *op.GRApplyMoEC) { a.W = e.shorter(a.W, 1) }},
		{"short_shared", errShape, func(e *env, a *op.GRApplyMoEC) { a.Shared = e.shorter(a.Shared, 5) }},
		{"short_Hn", errShape, func(e *env, a *op.GRApplyMoEC) { a.Hn = e.shorter(a.Hn, 1) }},
		{"short_beta", errShape, func(e *env, a *op.GRApplyMoEC) { a.Beta = e.shorter(a.Beta, 1) }},
		{"short_norm", errShape, func(e *env, a *op.GRApplyMoEC) { a.Norm = a.Norm[:15] }},
		{"K_zero", errShape, func(e *env, a *op.GRApplyMoEC) { a.K = 0 }},
		{"rk_F32", errDType, func(e *env, a *op.GRApplyMoEC) { a.RK = e.retyped(a.RK) }},
		{"missing_ye", errArg, func(e *env, a *op.GRApplyMoEC) { a.YE = noTensor }},
		{"value_rk_past_rows", errArg, func(e *env, a *op.GRApplyMoEC) { a.RK = e.i32([]int32{0, 3, 1, -1}) }},
		{"value_rk_minus2", errArg, func(e *env, a *op.GRApplyMoEC) { a.RK = e.i32([]int32{0, 2, -2, -1}) }},
	})
}

// grApplyEntries are the GRApplyMoEC table: every CombineCase without and with Shared and Hn.
func grApplyEntries() []entry {
	var es []entry
	for _, c := range CombineCases() {
		for _, v := range []struct{ shared, hn bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			es = append(es, grApplyEntry(c, v.shared, v.hn))
		}
	}
	return es
}

// grApplyEntry is one GRApplyMoEC case (see RunGRApplyMoEC), with Shared and Hn as asked.
func grApplyEntry(c CombineCase, shared, hn bool) entry {
	S, D, T, K := c.S, c.D, c.T, c.K
	return entry{name: fmt.Sprintf("%s/shared%v_Hn%v", c.Name(), shared, hn), short: c.Short, flops: 2 * float64(T*K) * float64(D),
		build: func(e *env) (func(op.Pass) error, func(*testing.T, *suite)) {
			H0, beta := Floats(c.Seed, T*S*D, 2), Uniform(c.Seed+1, T*S, 0, 2)
			ye, rk, w := combineInputs(c)
			sh, norm := Floats(c.Seed+5, T*D, 0.5), Floats(c.Seed+6, S*D, 0.3)
			H := e.f32(H0)
			a := op.GRApplyMoEC{H: H, Beta: e.f32(beta), YE: e.f32(ye), RK: e.i32(rk), W: e.f32(w), T: T, S: S, K: K, D: D}
			if shared {
				a.Shared = e.f32(sh)
			}
			if hn {
				a.Hn, a.Norm, a.Eps = e.out("Hn", T*S*D), norm, eps
			}
			return func(p op.Pass) error { return p.GRApplyMoEC(a) }, func(t *testing.T, s *suite) {
				u := RefMoECombine(ye, rk, w, T, K, D)
				if shared {
					for j := range u {
						u[j] += float64(sh[j])
					}
				}
				want := RefGRWrite(H0, beta, u, T, S, D)
				s.close(t, "H", f32s(H), want)
				if hn {
					s.close(t, "Hn", f32s(a.Hn), RefRMSNorm1p(want, S, D, norm, eps))
				}
			}
		}}
}

// pleWeights builds a PLECase's layer from seed: Table (seed, scale 1), Key (seed+1, 0.2),
// Value (seed+2, 0.2) in the case's dtype, NormKey / NormQuery / NormConv Floats(seed+3..5,
// 0.3), ConvW Floats(seed+6, 0.5).
func pleWeights(t tb, c PLECase, seed uint64) *op.PLEWeights {
	S, D, E := c.S, c.D, c.Heads*c.HeadDim
	w := &op.PLEWeights{S: S, D: D, EmbedDim: E, HeadDim: c.HeadDim, Dilation: c.Dilation}
	w.Table = mustMatrix(t, seed, c.Rows, c.HeadDim, c.DType, 1)
	w.Key = mustMatrix(t, seed+1, S*D, E, c.DType, 0.2)
	w.Value = mustMatrix(t, seed+2, D, E, c.DType, 0.2)
	w.NormKey = Floats(seed+3, S*D, 0.3)
	w.NormQuery = Floats(seed+4, S*D, 0.3)
	w.NormConv = Floats(seed+5, S*D, 0.3)
	w.ConvW = Floats(seed+6, S*D*c.ConvK, 0.5)
	return w
}

// RunPLEApply runs PLECases through Pass.PLEApply against RefPLEApply (weights seeded
// 2000+10i, H 2100+i, ids 2200+i, the first and last table rows among them): over the whole
// stream from a zero conv state, in two ops of one Pass split at Split (the second reading the
// state the first wrote), and from a non-zero state (Floats 2300+i); H and the final conv state
// are compared. The "parts" variants give the table as PLEApply.Parts (4 row blocks, views of
// the same data; also split in two ops) and must give the bits of the same run over W.Table
// (not for the FP8Block tables, whose 128-row scale blocks do not split in 4 parts of 300 rows).
// Then QPLECases (weights 24000+10i, inputs from 24500+i) with a quantized table, Key and Value.
func RunPLEApply(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "PLEApply")
	for i, c := range PLECases() {
		for _, v := range pleVariants(c) {
			s.run(t, c.Name()+"/"+v.name, c.Short, func(t *testing.T) {
				s.pleCase(t, be, c, pleWeights(t, c, uint64(2000+10*i)), uint64(2100+i), v)
			})
		}
	}
	for i, c := range QPLECases() {
		for _, v := range pleVariants(c.PLE) {
			if v.parts && c.Q.FP8 {
				continue // the case's 300 rows do not split into parts of whole 128-row scale blocks
			}
			s.runQ(t, c.Name()+"/"+v.name, c.Short, func(t *testing.T) {
				p, seed := c.PLE, uint64(24000+10*i)
				w := pleWeights(t, p, seed)
				E := p.Heads * p.HeadDim
				w.Table = c.Q.matrix(t, seed, p.Rows, p.HeadDim, 1)
				w.Key = c.Q.matrix(t, seed+1, p.S*p.D, E, 0.2)
				w.Value = c.Q.matrix(t, seed+2, p.D, E, 0.2)
				s.pleCase(t, be, p, w, uint64(24500+i), v)
			})
		}
	}
	w := pleWeights(t, PLECase{S: 2, D: 8, Heads: 2, HeadDim: 3, Rows: 10, ConvK: 4, Dilation: 3, DType: op.F32}, 1)
	wideTable := *w
	wideTable.Table = mustMatrix(t, 9, 10, 4, op.F32, 1)
	noTable := *w
	noTable.Table = nil
	parts, err := TableParts(w.Table, 5)
	if err != nil {
		t.Fatal(err)
	}
	bf16Part := mustMatrix(t, 10, 5, 3, op.BF16, 1)
	runBad(t, s, be, func(e *env) op.PLEApply {
		return op.PLEApply{H: e.f32(Floats(1, 2*16, 1)), T: 2, IDs: e.i32([]int32{0, 9, 2, 3}), W: w,
			ConvState: e.f32(make([]float32, w.ConvStateLen())), Eps: eps}
	}, op.Pass.PLEApply, []badCase[op.PLEApply]{
		{"nil_weights", errArg, func(e *env, a *op.PLEApply) { a.W = nil }},
		{"short_ids", errShape, func(e *env, a *op.PLEApply) { a.IDs = e.shorter(a.IDs, 1) }},
		{"short_state", errShape, func(e *env, a *op.PLEApply) { a.ConvState = e.shorter(a.ConvState, 1) }},
		{"short_H", errShape, func(e *env, a *op.PLEApply) { a.H = e.shorter(a.H, 1) }},
		{"negative_T", errShape, func(e *env, a *op.PLEApply) { a.T = -1 }},
		{"eps_NaN", errArg, func(e *env, a *op.PLEApply) { a.Eps = nan32 }},
		{"ids_F32", errDType, func(e *env, a *op.PLEApply) { a.IDs = e.retyped(a.IDs) }},
		{"missing_state", errArg, func(e *env, a *op.PLEApply) { a.ConvState = noTensor }},
		{"table_width", errShape, func(e *env, a *op.PLEApply) { a.W = &wideTable }},
		{"no_table", errArg, func(e *env, a *op.PLEApply) { a.W = &noTable }},
		{"table_and_parts", errArg, func(e *env, a *op.PLEApply) { a.Parts, a.PartRows = parts, 5 }},
		{"part_rows_zero", errShape, func(e *env, a *op.PLEApply) { a.W, a.Parts = &noTable, parts }},
		{"part_rows", errShape, func(e *env, a *op.PLEApply) { a.W, a.Parts, a.PartRows = &noTable, parts, 4 }},
		{"part_width", errShape, func(e *env, a *op.PLEApply) {
			a.W, a.Parts, a.PartRows = &noTable, []*op.Matrix{parts[0], mustMatrix(t, 11, 5, 4, op.F32, 1)}, 5
		}},
		{"part_dtypes", errDType, func(e *env, a *op.PLEApply) {
			a.W, a.Parts, a.PartRows = &noTable, []*op.Matrix{parts[0], bf16Part}, 5
		}},
		{"nil_part", errArg, func(e *env, a *op.PLEApply) { a.W, a.Parts, a.PartRows = &noTable, []*op.Matrix{parts[0], nil}, 5 }},
		{"value_id_past_table", errArg, func(e *env, a *op.PLEApply) { a.IDs = e.i32([]int32{0, 1, 2, 10}) }},
		{"value_negative_id", errArg, func(e *env, a *op.PLEApply) { a.IDs = e.i32([]int32{0, -1, 2, 3}) }},
		{"value_id_past_parts", errArg, func(e *env, a *op.PLEApply) {
			a.W, a.Parts, a.PartRows, a.IDs = &noTable, parts, 5, e.i32([]int32{0, 1, 2, 10})
		}},
	})
}

// pleVariant is one way of running a PLE case: whole or split in two ops, from a zero or a
// random conv state, over W.Table or its parts.
type pleVariant struct {
	name  string
	split int
	state bool
	parts bool // the table as PLEApply.Parts (4 row blocks), compared bitwise with W.Table
}

func pleVariants(c PLECase) []pleVariant {
	vs := []pleVariant{{"whole", 0, false, false}, {"state", 0, true, false}, {"parts", 0, true, true}}
	if c.Split > 0 {
		vs = append(vs, pleVariant{fmt.Sprintf("split%d", c.Split), c.Split, false, false},
			pleVariant{fmt.Sprintf("split%d_parts", c.Split), c.Split, false, true})
	}
	return vs
}

// TableParts splits a table m [N, K] (F32, BF16, F16, QAffine, QFloat, FP8Block or GGML) into row
// blocks of rows rows each, each a view of m's storage: PLEApply.Parts of the same table. rows
// must divide N, and for FP8Block be a multiple of op.FP8BlockSize (a part keeps whole scale
// blocks). Errors wrap op.ErrShape.
func TableParts(m *op.Matrix, rows int) ([]*op.Matrix, error) {
	if rows <= 0 || m.N%rows != 0 || (m.DType == op.FP8Block && rows%op.FP8BlockSize != 0) {
		return nil, fmt.Errorf("TableParts: %w: %v table of %d rows into parts of %d", op.ErrShape, m.DType, m.N, rows)
	}
	var parts []*op.Matrix
	for lo := 0; lo < m.N; lo += rows {
		p := &op.Matrix{N: rows, K: m.K, DType: m.DType}
		switch m.DType {
		case op.F32:
			p.F32 = m.F32[lo*m.K : (lo+rows)*m.K]
		case op.QAffine:
			q, cw, ng := m.Q, m.K*m.Q.Bits/32, m.K/m.Q.Group
			p.Q = &op.Quant{Bits: q.Bits, Group: q.Group, ScaleDType: q.ScaleDType, Codes: q.Codes[lo*cw : (lo+rows)*cw],
				Scales: q.Scales[lo*ng : (lo+rows)*ng], Biases: q.Biases[lo*ng : (lo+rows)*ng]}
		case op.QFloat:
			q, cw, ng := m.QF, m.K*m.QF.Mode.Bits()/32, m.K/m.QF.Mode.Group()
			p.QF = &op.QuantFloat{Mode: q.Mode, Codes: q.Codes[lo*cw : (lo+rows)*cw], Scales: q.Scales[lo*ng : (lo+rows)*ng]}
		case op.GGML:
			rb, _ := m.GG.Type.RowBytes(m.K)
			p.GG = &op.GGMLBlocks{Type: m.GG.Type, Data: m.GG.Data[lo*rb : (lo+rows)*rb]}
		case op.FP8Block:
			f, gc := m.FP8, m.FP8.Grid[1]
			b0, b1 := lo/op.FP8BlockSize, (lo+rows)/op.FP8BlockSize
			p.FP8 = &op.BlockFP8{Codes: f.Codes[lo*m.K : (lo+rows)*m.K], ScaleDType: f.ScaleDType, Grid: op.FP8Grid(rows, m.K)}
			if f.ScaleDType == op.F32 {
				p.FP8.ScalesF32 = f.ScalesF32[b0*gc : b1*gc]
			} else {
				p.FP8.Scales = f.Scales[b0*gc : b1*gc]
			}
		default:
			p.U16 = m.U16[lo*m.K : (lo+rows)*m.K]
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// pleCase runs one PLE case with weights w, inputs seeded from seed (H seed, ids seed+100, the
// state seed+200).
func (s *suite) pleCase(t *testing.T, be op.Backend, c PLECase, w *op.PLEWeights, seed uint64, v pleVariant) {
	C := c.S * c.D
	H0 := Floats(seed, c.T*C, 2)
	ids := Tokens(seed+100, c.T*c.Heads, c.Rows, 0, 0)
	ids[0], ids[len(ids)-1] = int32(c.Rows-1), 0
	st0 := make([]float32, w.ConvStateLen())
	if v.state {
		st0 = Floats(seed+200, len(st0), 1)
	}
	run := func(parts bool) (H, St []float32) {
		e := newEnv(t, be)
		Ht, IDs, Stt := e.f32(H0), e.i32(ids), e.f32(st0)
		wp := w
		var tab []*op.Matrix
		if parts {
			var err error
			if tab, err = TableParts(w.Table, c.Rows/4); err != nil {
				t.Fatal(err)
			}
			wg := *w
			wg.Table = nil
			wp = &wg
		}
		e.pass(func(p op.Pass) error {
			for _, r := range [][2]int{{0, v.split}, {v.split, c.T}} {
				if r[1] == r[0] {
					continue
				}
				a := op.PLEApply{H: Ht.Slice(r[0]*C, r[1]*C), T: r[1] - r[0], IDs: IDs.Slice(r[0]*c.Heads, r[1]*c.Heads),
					W: wp, Parts: tab, ConvState: Stt, Eps: eps}
				if parts {
					a.PartRows = c.Rows / 4
				}
				if err := p.PLEApply(a); err != nil {
					return err
				}
			}
			return nil
		})
		return f32s(Ht), f32s(Stt)
	}
	H, St := run(v.parts)
	wantH, wantSt := RefPLEApply(H0, c.T, ids, w, st0, eps)
	s.close(t, "H", H, wantH)
	s.close(t, "convState", St, wantSt)
	if v.parts {
		H1, St1 := run(false)
		exactF32(t, "H (parts against the whole table)", H, H1)
		exactF32(t, "convState (parts against the whole table)", St, St1)
	}
}
