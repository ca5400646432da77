package optest

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/stratakernels/strata/op"
)

// RunGDNPre runs GDNCases through Pass.GDNPre against RefGDNPre (inputs GDNCase.Inputs): in one
// op, and for T > 2 in two ops of one Pass split after 2 tokens (fewer than the ConvK-1 = 3 of
// the conv history), the second reading the conv state the first wrote. The new conv state
// must be the last inputs exactly.
func RunGDNPre(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "GDNPre")
	for _, c := range GDNCases() {
		splits := []int{0}
		if c.T > 2 {
			splits = append(splits, 2)
		}
		for _, split := range splits {
			name := c.FullName()
			if split > 0 {
				name += fmt.Sprintf("/split%d", split)
			}
			s.run(t, name, c.Short, func(t *testing.T) {
				in, p := c.Inputs(), c.Params()
				T, C, qk, vd := c.T, c.Channels(), c.Hk*c.Dk, c.Hv*c.Dv
				e := newEnv(t, be)
				Q, K, V := e.out("q", T*qk), e.out("k", T*qk), e.out("v", T*vd)
				G, Beta := e.out("g", T*c.Hv), e.out("beta", T*c.Hv)
				QKV, A, B, St := e.f32(in.QKV), e.f32(in.A), e.f32(in.B), e.f32(in.ConvState)
				e.pass(func(ps op.Pass) error {
					for _, r := range [][2]int{{0, split}, {split, T}} {
						if r[0] == r[1] {
							continue
						}
						pp := p
						pp.T = r[1] - r[0]
						sl := func(x op.Tensor, w int) op.Tensor { return x.Slice(r[0]*w, r[1]*w) }
						err := ps.GDNPre(op.GDNPre{Q: sl(Q, qk), K: sl(K, qk), V: sl(V, vd), G: sl(G, c.Hv), Beta: sl(Beta, c.Hv),
							QKV: sl(QKV, C), A: sl(A, c.Hv), B: sl(B, c.Hv), ConvState: St,
							ConvW: in.ConvW, ALog: in.ALog, DtBias: in.DtBias, P: pp})
						if err != nil {
							return err
						}
					}
					return nil
				})
				ref := RefGDNPre(p, in.QKV, in.A, in.B, in.ConvState, in.ConvW, in.ALog, in.DtBias)
				s.close(t, "q", f32s(Q), ref.Q)
				s.close(t, "k", f32s(K), ref.K)
				s.close(t, "v", f32s(V), ref.V)
				s.close(t, "g", f32s(G), ref.G)
				s.close(t, "beta", f32s(Beta), ref.Beta)
				s.close(t, "convState", f32s(St), ref.ConvState)
			})
		}
	}
	c := GDNCase{T: 5, Hk: 2, Hv: 6, Dk: 4, Dv: 4, ConvK: 4, Seed: 3}
	in := c.Inputs()
	T, HkDk, HvDv, C := c.T, c.Hk*c.Dk, c.Hv*c.Dv, c.Channels()
	runBad(t, s, be, func(e *env) op.GDNPre {
		return op.GDNPre{Q: e.out("q", T*HkDk), K: e.out("k", T*HkDk), V: e.out("v", T*HvDv), G: e.out("g", T*c.Hv),
			Beta: e.out("beta", T*c.Hv), QKV: e.f32(in.QKV), A: e.f32(in.A), B: e.f32(in.B), ConvState: e.f32(in.ConvState),
			ConvW: in.ConvW, ALog: in.ALog, DtBias: in.DtBias, P: c.Params()}
	}, op.Pass.GDNPre, []badCase[op.GDNPre]{
		{"short_qkv", errShape, func(e *env, a *op.GDNPre) { a.QKV = e.shorter(a.QKV, 1) }},
		{"short_state", errShape, func(e *env, a *op.GDNPre) { a.ConvState = e.shorter(a.ConvState, C) }},
		{"Hv_not_multiple_of_Hk", errArg, func(e *env, a *op.GDNPre) { a.P.Hk = 4 }},
		{"T_zero", errShape, func(e *env, a *op.GDNPre) { a.P.T = 0 }},
		{"ConvK_zero", errShape, func(e *env, a *op.GDNPre) { a.P.ConvK = 0 }},
		{"short_convW", errShape, func(e *env, a *op.GDNPre) { a.ConvW = a.ConvW[1:] }},
		{"short_ALog", errShape, func(e *env, a *op.GDNPre) { a.ALog = a.ALog[1:] }},
		{"unknown_map", errArg, func(e *env, a *op.GDNPre) { a.P.Map = op.HeadMap(5) }},
		{"short_beta", errShape, func(e *env, a *op.GDNPre) { a.Beta = e.shorter(a.Beta, 1) }},
		{"q_I32", errDType, func(e *env, a *op.GDNPre) { a.Q = e.retyped(a.Q) }},
		{"missing_a", errArg, func(e *env, a *op.GDNPre) { a.A = noTensor }},
	})
}

// gdnScanInputs returns the normalised q, k of a case (RefL2Norm rounded to float32, what the
// scan takes).
func gdnScanInputs(c GDNCase, in GDNInputs) (q, k []float32) {
	return round32(RefL2Norm(To64(in.Q), c.Dk, 1/math.Sqrt(float64(c.Dk)))), round32(RefL2Norm(To64(in.K), c.Dk, 1))
}

var scanModes = []struct {
	name string
	mode op.ScanMode
}{{"auto", op.ScanAuto}, {"chunked", op.Chunked}, {"recurrent", op.Recurrent}}

// RunGDNScan runs GDNCases through Pass.GDNScan in each ScanMode against RefGDNScan (q and k
// l2-normalised by RefL2Norm), comparing o and the final state; for T > 64 also in ScanAuto as
// two ops of one Pass split at 64 and at 37 (the second continuing from the state the first
// wrote). The "normqk" variants (ScanAuto and Recurrent; split at 37 for T > 64) give the raw q
// and k with NormQK set, against the scan of RefL2Norm's float64 values, and require Q and K
// unchanged.
func RunGDNScan(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "GDNScan")
	s.runEntries(t, be, gdnScanEntries())
	c := GDNCase{T: 5, Hk: 2, Hv: 6, Dk: 4, Dv: 4, ConvK: 4, Seed: 3}
	T, HkDk, HvDv := c.T, c.Hk*c.Dk, c.Hv*c.Dv
	runBad(t, s, be, func(e *env) op.GDNScan {
		return op.GDNScan{O: e.out("o", T*HvDv), State: e.f32(Floats(1, c.Hv*c.Dk*c.Dv, 0.1)), Q: e.f32(Floats(2, T*HkDk, 0.3)),
			K: e.f32(Floats(3, T*HkDk, 0.3)), V: e.f32(Floats(4, T*HvDv, 1)), G: e.f32(Uniform(5, T*c.Hv, -1, 0)),
			Beta: e.f32(Uniform(6, T*c.Hv, 0, 1)), P: c.Params(), Mode: op.ScanAuto}
	}, op.Pass.GDNScan, []badCase[op.GDNScan]{
		{"long_o", errShape, func(e *env, a *op.GDNScan) { a.O = e.shorter(a.O, -1) }},
		{"short_q", errShape, func(e *env, a *op.GDNScan) { a.Q = e.shorter(a.Q, 1) }},
		{"short_state", errShape, func(e *env, a *op.GDNScan) { a.State = e.shorter(a.State, 1) }},
		{"Hv_not_multiple_of_Hk", errArg, func(e *env, a *op.GDNScan) { a.P.Hv = 5 }},
		{"T_zero", errShape, func(e *env, a *op.GDNScan) { a.P.T = 0 }},
		{"negative_Dk", errShape, func(e *env, a *op.GDNScan) { a.P.Dk = -4 }},
		{"unknown_mode", errArg, func(e *env, a *op.GDNScan) { a.Mode = op.ScanMode(7) }},
		{"unknown_map", errArg, func(e *env, a *op.GDNScan) { a.P.Map = op.HeadMap(-1) }},
		{"state_I32", errDType, func(e *env, a *op.GDNScan) { a.State = e.retyped(a.State) }},
		{"missing_g", errArg, func(e *env, a *op.GDNScan) { a.G = noTensor }},
	})
}

// gdnScanVariant is one way of running a GDNScan case: its mode, split into two ops at split
// (0: one op), with raw q and k and NormQK.
type gdnScanVariant struct {
	name  string
	mode  op.ScanMode
	split int
	norm  bool
}

func gdnScanVariants(c GDNCase) []gdnScanVariant {
	var vs []gdnScanVariant
	for _, m := range scanModes {
		vs = append(vs, gdnScanVariant{m.name, m.mode, 0, false})
	}
	if c.T > 64 {
		vs = append(vs, gdnScanVariant{"auto_split64", op.ScanAuto, 64, false}, gdnScanVariant{"auto_split37", op.ScanAuto, 37, false})
	}
	vs = append(vs, gdnScanVariant{"normqk", op.ScanAuto, 0, true}, gdnScanVariant{"normqk_recurrent", op.Recurrent, 0, true})
	if c.T > 64 {
		vs = append(vs, gdnScanVariant{"normqk_split37", op.ScanAuto, 37, true})
	}
	return vs
}

// gdnScanEntries are the GDNScan table: every GDNCase in each of its variants (the variants of
// a case share its two references).
func gdnScanEntries() []entry {
	var es []entry
	for _, c := range GDNCases() {
		var refs [2]struct {
			once  sync.Once
			o, st []float64
		}
		ref := func(norm bool) ([]float64, []float64) {
			r := &refs[0]
			if norm {
				r = &refs[1]
			}
			r.once.Do(func() {
				in := c.Inputs()
				q, k := To64(in.Q), To64(in.K)
				if norm {
					q, k = RefL2Norm(q, c.Dk, 1/math.Sqrt(float64(c.Dk))), RefL2Norm(k, c.Dk, 1)
				} else {
					qs, ks := gdnScanInputs(c, in)
					q, k = To64(qs), To64(ks)
				}
				r.o, r.st = RefGDNScan(c.Params(), q, k, To64(in.V), To64(in.G), To64(in.Beta), To64(in.State))
			})
			return r.o, r.st
		}
		for _, v := range gdnScanVariants(c) {
			es = append(es, gdnScanEntry(c, v, ref))
		}
	}
	return es
}

// gdnScanEntry is one GDNScan case in variant v against ref(v.norm) (o and the final state);
// flops are the recurrence's 6 Dk Dv per token and value head (S^T k, k delta^T, S^T q:
// Model.PrefillFLOPs' count), whatever algorithm runs.
func gdnScanEntry(c GDNCase, v gdnScanVariant, ref func(norm bool) (o, state []float64)) entry {
	return entry{name: c.FullName() + "/" + v.name, short: c.Short, flops: 6 * float64(c.T*c.Hv) * float64(c.Dk*c.Dv),
		build: func(e *env) (func(op.Pass) error, func(*testing.T, *suite)) {
			in, p := c.Inputs(), c.Params()
			q, k := in.Q, in.K
			if !v.norm {
				q, k = gdnScanInputs(c, in)
			}
			T, qk, vd := c.T, c.Hk*c.Dk, c.Hv*c.Dv
			O, St := e.out("o", T*vd), e.f32(in.State)
			Q, K, V, G, Beta := e.f32(q), e.f32(k), e.f32(in.V), e.f32(in.G), e.f32(in.Beta)
			call := func(ps op.Pass) error {
				for _, r := range [][2]int{{0, v.split}, {v.split, T}} {
					if r[0] == r[1] {
						continue
					}
					pp := p
					pp.T = r[1] - r[0]
					sl := func(x op.Tensor, w int) op.Tensor { return x.Slice(r[0]*w, r[1]*w) }
					err := ps.GDNScan(op.GDNScan{O: sl(O, vd), State: St, Q: sl(Q, qk), K: sl(K, qk), V: sl(V, vd),
						G: sl(G, c.Hv), Beta: sl(Beta, c.Hv), P: pp, Mode: v.mode, NormQK: v.norm})
					if err != nil {
						return err
					}
				}
				return nil
			}
			return call, func(t *testing.T, s *suite) {
				wo, ws := ref(v.norm)
				s.close(t, "o", f32s(O), wo)
				s.close(t, "state", f32s(St), ws)
				exactF32(t, "q (not modified)", f32s(Q), q)
				exactF32(t, "k (not modified)", f32s(K), k)
			}
		}}
}

// RunGDNPost runs GDNCases through Pass.GDNPost with both gate activations, out of place and in
// place over o (Y = O), against RefGDNPost (o = the case's V, z = Z, w = NormW, eps 1e-6).
func RunGDNPost(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "GDNPost")
	acts := []struct {
		name string
		act  op.GateAct
	}{{"silu", op.ActSilu}, {"sigmoid", op.ActSigmoid}}
	for _, c := range GDNCases() {
		for _, a := range acts {
			for _, inPlace := range []bool{false, true} {
				name := c.FullName() + "/" + a.name
				if inPlace {
					name += "_in_place"
				}
				s.run(t, name, c.Short, func(t *testing.T) {
					in := c.Inputs()
					n := c.T * c.Hv * c.Dv
					e := newEnv(t, be)
					O := e.f32(in.V)
					Y := O
					if !inPlace {
						Y = e.out("y", n)
					}
					args := op.GDNPost{Y: Y, O: O, Z: e.f32(in.Z), T: c.T, Hv: c.Hv, Dv: c.Dv, W: in.NormW, Eps: eps, Act: a.act}
					e.pass(func(p op.Pass) error { return p.GDNPost(args) })
					s.close(t, "y", f32s(Y), RefGDNPost(in.V, in.Z, c.Dv, in.NormW, eps, a.act))
				})
			}
		}
	}
	const T, Hv, Dv = 3, 2, 4
	runBad(t, s, be, func(e *env) op.GDNPost {
		n := T * Hv * Dv
		return op.GDNPost{Y: e.out("y", n), O: e.f32(Floats(1, n, 1)), Z: e.f32(Floats(2, n, 1)), T: T, Hv: Hv, Dv: Dv,
			W: make([]float32, Dv), Eps: eps, Act: op.ActSigmoid}
	}, op.Pass.GDNPost, []badCase[op.GDNPost]{
		{"short_z", errShape, func(e *env, a *op.GDNPost) { a.Z = e.shorter(a.Z, 1) }},
		{"long_w", errShape, func(e *env, a *op.GDNPost) { a.W = make([]float32, Dv+1) }},
		{"T_zero", errShape, func(e *env, a *op.GDNPost) { a.T = 0 }},
		{"unknown_act", errArg, func(e *env, a *op.GDNPost) { a.Act = op.GateAct(9) }},
		{"eps_NaN", errArg, func(e *env, a *op.GDNPost) { a.Eps = nan32 }},
		{"y_I32", errDType, func(e *env, a *op.GDNPost) { a.Y = e.retyped(a.Y) }},
		{"missing_o", errArg, func(e *env, a *op.GDNPost) { a.O = noTensor }},
	})
}
