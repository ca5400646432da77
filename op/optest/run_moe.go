package optest

import (
	"math"
	"testing"

	"github.com/stratakernels/strata/op"
)

// moeLogits returns case i's router logits [T, E] (seed 600+i for TopKRoute, 800+i for the
// experts' routing); with Ties rounded to multiples of 1/2.
func moeLogits(c MoECase, seed uint64) []float32 {
	l := Floats(seed, c.T*c.E, 2)
	if c.Ties {
		for j, v := range l {
			l[j] = float32(math.Round(float64(v)*2) / 2)
		}
	}
	return l
}

// RunTopKRoute runs MoECases through Pass.TopKRoute (logits seeded 600+i) against
// RefTopKRoute, and a hand-made tie case: logits (1, 3, 3, 0, 3, 1), top-4 must pick experts
// 1, 2, 4, 0 in that order. A slot may differ from the reference only where the two experts'
// float64 probabilities are within the "tie" tolerance of each other and not exactly equal;
// the weights are compared with the reference weights of the experts the backend picked.
func RunTopKRoute(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "TopKRoute")
	type rc struct {
		name   string
		logits []float32
		c      MoECase
		short  bool
	}
	var cases []rc
	for i, c := range MoECases() {
		cases = append(cases, rc{c.Name(), moeLogits(c, uint64(600+i)), c, c.Short})
	}
	cases = append(cases, rc{"explicit_ties", []float32{1, 3, 3, 0, 3, 1}, MoECase{T: 1, E: 6, K: 4, Norm: true}, true})
	for _, r := range cases {
		c := r.c
		s.run(t, r.name, r.short, func(t *testing.T) {
			e := newEnv(t, be)
			W, Idx := e.out("w", c.T*c.K), e.outI32("idx", c.T*c.K)
			a := op.TopKRoute{W: W, Idx: Idx, Logits: e.f32(r.logits), T: c.T, E: c.E, K: c.K, Norm: c.Norm}
			e.pass(func(p op.Pass) error { return p.TopKRoute(a) })
			idx := i32s(Idx)
			_, wantIdx, prob := RefTopKRoute(r.logits, c.T, c.E, c.K, c.Norm)
			s.checkRoute(t, idx, wantIdx, prob, c)
			if r.name == "explicit_ties" {
				exactI32(t, "idx", idx, []int32{1, 2, 4, 0})
			}
			s.close(t, "w", f32s(W), routeWeights(idx, prob, c))
		})
	}
	runBad(t, s, be, func(e *env) op.TopKRoute {
		return op.TopKRoute{W: e.out("w", 4), Idx: e.outI32("idx", 4), Logits: e.f32(Floats(1, 6, 1)), T: 2, E: 3, K: 2, Norm: true}
	}, op.Pass.TopKRoute, []badCase[op.TopKRoute]{
		{"K_above_E", errArg, func(e *env, a *op.TopKRoute) { a.K, a.W, a.Idx = 4, e.out("w4", 8), e.outI32("idx4", 8) }},
		{"K_zero", errArg, func(e *env, a *op.TopKRoute) { a.K = 0 }},
		{"E_zero", errShape, func(e *env, a *op.TopKRoute) { a.E = 0 }},
		{"negative_T", errShape, func(e *env, a *op.TopKRoute) { a.T = -1 }},
		{"short_idx", errShape, func(e *env, a *op.TopKRoute) { a.Idx = e.shorter(a.Idx, 1) }},
		{"short_logits", errShape, func(e *env, a *op.TopKRoute) { a.Logits = e.shorter(a.Logits, 1) }},
		{"idx_F32", errDType, func(e *env, a *op.TopKRoute) { a.Idx = e.retyped(a.Idx) }},
		{"missing_w", errArg, func(e *env, a *op.TopKRoute) { a.W = noTensor }},
		{"value_NaN_logit", errArg, func(e *env, a *op.TopKRoute) { a.Logits = e.f32([]float32{0, 1, 2, 3, nan32, 5}) }},
		{"value_Inf_logit", errArg, func(e *env, a *op.TopKRoute) {
			a.Logits = e.f32([]float32{float32(math.Inf(-1)), 1, 2, 3, 4, 5})
		}},
	})
}

// checkRoute compares the picked experts with the reference order (see RunTopKRoute).
func (s *suite) checkRoute(t *testing.T, got, want []int32, prob []float64, c MoECase) {
	t.Helper()
	tie := s.o.tol(s.op, "tie")
	for tk := 0; tk < c.T; tk++ {
		seen := map[int32]bool{}
		p := prob[tk*c.E : (tk+1)*c.E]
		for j := 0; j < c.K; j++ {
			g, w := got[tk*c.K+j], want[tk*c.K+j]
			if g < 0 || int(g) >= c.E || seen[g] {
				t.Fatalf("token %d slot %d: expert %d (out of range or repeated)", tk, j, g)
			}
			seen[g] = true
			if g == w {
				continue
			}
			if p[g] == p[w] {
				t.Fatalf("token %d slot %d: expert %d, want %d (an exact tie goes to the lower index)", tk, j, g, w)
			}
			if math.Abs(p[g]-p[w]) > tie*p[w] {
				t.Fatalf("token %d slot %d: expert %d (p %.9g), want %d (p %.9g)", tk, j, g, p[g], w, p[w])
			}
		}
	}
}

// routeWeights is the reference weights of the picked experts idx [T, K].
func routeWeights(idx []int32, prob []float64, c MoECase) []float64 {
	w := make([]float64, len(idx))
	for tk := 0; tk < c.T; tk++ {
		var sum float64
		for j := 0; j < c.K; j++ {
			w[tk*c.K+j] = prob[tk*c.E+int(idx[tk*c.K+j])]
			sum += w[tk*c.K+j]
		}
		for j := 0; c.Norm && j < c.K; j++ {
			w[tk*c.K+j] /= sum
		}
	}
	return w
}

// moeExperts builds case i's experts (gate_up seeded 1000i+2e, down 1000i+2e+1, scale 0.1).
func moeExperts(t tb, c MoECase, i int) *op.Experts {
	ex := &op.Experts{E: c.E, D: c.D, I: c.I}
	for e := 0; e < c.E; e++ {
		ex.GateUp = append(ex.GateUp, mustMatrix(t, uint64(1000*i+2*e), 2*c.I, c.D, c.DType, 0.1))
		ex.Down = append(ex.Down, mustMatrix(t, uint64(1000*i+2*e+1), c.D, c.I, c.DType, 0.1))
	}
	return ex
}

// RunMoEExperts runs MoECases through Pass.MoEExperts against RefMoEExperts: x seeded 700+i,
// the slots routed by RefTopKRoute over logits seeded 800+i, with the case's empty slots. The
// slot rows rk must equal the reference layout exactly, rows past the used ones must be zero.
// Then QMoECases (experts seeded 30000+1000i, x 29000+i, logits 29500+i).
func RunMoEExperts(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "MoEExperts")
	s.runEntries(t, be, moeExpertsEntries())
	gu, _, _ := RandMatrix(1, 8, 6, op.F32, 1)
	dn, _, _ := RandMatrix(2, 6, 4, op.BF16, 1)
	ex := &op.Experts{E: 2, D: 6, I: 4, GateUp: []*op.Matrix{gu, gu}, Down: []*op.Matrix{dn, dn}}
	runBad(t, s, be, func(e *env) op.MoEExperts {
		return op.MoEExperts{YE: e.out("ye", 4*6), RK: e.outI32("rk", 4), X: e.f32(Floats(3, 12, 1)),
			Idx: e.i32([]int32{0, 1, -1, 0}), T: 2, K: 2, Ex: ex}
	}, op.Pass.MoEExperts, []badCase[op.MoEExperts]{
		{"nil_experts", errArg, func(e *env, a *op.MoEExperts) { a.Ex = nil }},
		{"expert_shapes", errShape, func(e *env, a *op.MoEExperts) {
			a.Ex = &op.Experts{E: 2, D: 6, I: 4, GateUp: []*op.Matrix{gu, dn}, Down: []*op.Matrix{dn, dn}}
		}},
		{"expert_count", errShape, func(e *env, a *op.MoEExperts) {
			a.Ex = &op.Experts{E: 3, D: 6, I: 4, GateUp: []*op.Matrix{gu, gu}, Down: []*op.Matrix{dn, dn}}
		}},
		{"split_up_shape", errShape, func(e *env, a *op.MoEExperts) {
			g, _, _ := RandMatrix(4, 4, 6, op.F32, 1)
			a.Ex = &op.Experts{E: 2, D: 6, I: 4, GateUp: []*op.Matrix{g, g}, Up: []*op.Matrix{g, gu}, Down: []*op.Matrix{dn, dn}}
		}},
		{"split_up_count", errShape, func(e *env, a *op.MoEExperts) {
			g, _, _ := RandMatrix(4, 4, 6, op.F32, 1)
			a.Ex = &op.Experts{E: 2, D: 6, I: 4, GateUp: []*op.Matrix{g, g}, Up: []*op.Matrix{g}, Down: []*op.Matrix{dn, dn}}
		}},
		{"short_ye", errShape, func(e *env, a *op.MoEExperts) { a.YE = e.shorter(a.YE, 4) }},
		{"short_rk", errShape, func(e *env, a *op.MoEExperts) { a.RK = e.shorter(a.RK, 1) }},
		{"short_x", errShape, func(e *env, a *op.MoEExperts) { a.X = e.shorter(a.X, 6) }},
		{"K_zero", errShape, func(e *env, a *op.MoEExperts) { a.K = 0 }},
		{"idx_F32", errDType, func(e *env, a *op.MoEExperts) { a.Idx = e.retyped(a.Idx) }},
		{"missing_idx", errArg, func(e *env, a *op.MoEExperts) { a.Idx = noTensor }},
		{"value_idx_E", errArg, func(e *env, a *op.MoEExperts) { a.Idx = e.i32([]int32{0, 1, 2, 0}) }},
		{"value_idx_minus2", errArg, func(e *env, a *op.MoEExperts) { a.Idx = e.i32([]int32{0, 1, -2, 0}) }},
	})
}

// moeExpertsEntries are the MoEExperts table: MoECases, then QMoECases.
func moeExpertsEntries() []entry {
	var es []entry
	for i, c := range MoECases() {
		es = append(es, moeExpertsEntry(c.Name(), c.Short, false, c, func(t tb) *op.Experts { return moeExperts(t, c, i) },
			uint64(700+i), uint64(800+i)))
	}
	for i, c := range QMoECases() {
		es = append(es, moeExpertsEntry(c.Name(), c.Short, true, c.moe(), func(t tb) *op.Experts { return c.experts(t, uint64(30000+1000*i)) },
			uint64(29000+i), uint64(29500+i)))
	}
	return es
}

// experts builds the case's quantized experts from seed (expert e: gate or gate_up seed+3e, up
// seed+3e+1, down seed+3e+2, scale 0.1).
func (c QMoECase) experts(t tb, seed uint64) *op.Experts {
	ex := &op.Experts{E: c.E, D: c.D, I: c.I}
	for e := 0; e < c.E; e++ {
		if c.Split {
			ex.GateUp = append(ex.GateUp, c.Q.matrix(t, seed+uint64(3*e), c.I, c.D, 0.1))
			ex.Up = append(ex.Up, c.UpQ.matrix(t, seed+uint64(3*e+1), c.I, c.D, 0.1))
		} else {
			ex.GateUp = append(ex.GateUp, c.Q.matrix(t, seed+uint64(3*e), 2*c.I, c.D, 0.1))
		}
		ex.Down = append(ex.Down, c.DownQ.matrix(t, seed+uint64(3*e+2), c.D, c.I, 0.1))
	}
	return ex
}

// moeExpertsEntry is one MoEExperts case with the experts of experts, x Floats(xSeed, 1) and
// the slots routed over logits seeded lSeed (with the case's empty slots); flops count the
// products of the used slots (gate, up and down: 6 D I per slot).
func moeExpertsEntry(name string, short, quant bool, c MoECase, experts func(t tb) *op.Experts, xSeed, lSeed uint64) entry {
	used := 0
	for j := 0; j < c.T*c.K; j++ {
		if !c.Empty(j) {
			used++
		}
	}
	return entry{name: name, short: short, quant: quant, flops: 6 * float64(used) * float64(c.D) * float64(c.I),
		build: func(e *env) (func(op.Pass) error, func(*testing.T, *suite)) {
			ex := experts(e.t)
			x := Floats(xSeed, c.T*c.D, 1)
			_, idx, _ := RefTopKRoute(moeLogits(c, lSeed), c.T, c.E, c.K, c.Norm)
			for j := range idx {
				if c.Empty(j) {
					idx[j] = -1
				}
			}
			YE, RK := e.out("ye", c.T*c.K*c.D), e.outI32("rk", c.T*c.K)
			a := op.MoEExperts{YE: YE, RK: RK, X: e.f32(x), Idx: e.i32(idx), T: c.T, K: c.K, Ex: ex}
			return func(p op.Pass) error { return p.MoEExperts(a) }, func(t *testing.T, s *suite) {
				wantYE, wantRK := RefMoEExperts(x, c.T, c.K, idx, ex)
				exactI32(t, "rk", i32s(RK), wantRK)
				ye := f32s(YE)
				s.close(t, "ye", ye[:used*c.D], wantYE[:used*c.D]) // later rows are unspecified
			}
		}}
}

// combineInputs returns case c's expert rows ye [Rows, D] (Floats seed+2), slot rows rk
// [T, K] (Slots seed+3, about one in 7 empty) and weights w [T, K] (Uniform seed+4 in [0, 0.3)).
func combineInputs(c CombineCase) (ye []float32, rk []int32, w []float32) {
	return Floats(c.Seed+2, c.Rows()*c.D, 1), Slots(c.Seed+3, c.T, c.K, c.Rows(), 7), Uniform(c.Seed+4, c.T*c.K, 0, 0.3)
}

// RunMoECombine runs CombineCases through Pass.MoECombine against RefMoECombine.
func RunMoECombine(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "MoECombine")
	for _, c := range CombineCases() {
		s.run(t, c.Name(), c.Short, func(t *testing.T) {
			ye, rk, w := combineInputs(c)
			e := newEnv(t, be)
			out := e.out("out", c.T*c.D)
			a := op.MoECombine{Out: out, YE: e.f32(ye), RK: e.i32(rk), W: e.f32(w), T: c.T, K: c.K, D: c.D}
			e.pass(func(p op.Pass) error { return p.MoECombine(a) })
			s.close(t, "out", f32s(out), RefMoECombine(ye, rk, w, c.T, c.K, c.D))
		})
	}
	runBad(t, s, be, func(e *env) op.MoECombine {
		return op.MoECombine{Out: e.out("out", 2*6), YE: e.f32(Floats(1, 4*6, 1)), RK: e.i32([]int32{0, 3, -1, 1}),
			W: e.f32(Floats(2, 4, 1)), T: 2, K: 2, D: 6}
	}, op.Pass.MoECombine, []badCase[op.MoECombine]{
		{"short_out", errShape, func(e *env, a *op.MoECombine) { a.Out = e.shorter(a.Out, 1) }},
		{"short_rk", errShape, func(e *env, a *op.MoECombine) { a.RK = e.shorter(a.RK, 1) }},
		{"short_w", errShape, func(e *env, a *op.MoECombine) { a.W = e.shorter(a.W, 1) }},
		{"ragged_ye", errShape, func(e *env, a *op.MoECombine) { a.YE = e.shorter(a.YE, 1) }},
		{"missing_ye", errArg, func(e *env, a *op.MoECombine) { a.YE = noTensor }},
		{"rk_F32", errDType, func(e *env, a *op.MoECombine) { a.RK = e.retyped(a.RK) }},
		{"D_zero", errShape, func(e *env, a *op.MoECombine) { a.D = 0 }},
		{"value_rk_past_rows", errArg, func(e *env, a *op.MoECombine) { a.RK = e.i32([]int32{0, 4, -1, 1}) }},
		{"value_rk_minus2", errArg, func(e *env, a *op.MoECombine) { a.RK = e.i32([]int32{0, -2, -1, 1}) }},
	})
}
