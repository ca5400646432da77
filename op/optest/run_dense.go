package optest

import (
	"fmt"
	"testing"

	"github.com/stratakernels/strata/op"
)

const eps = 1e-6 // rms_norm_eps of both models

// RunMatMul runs GEMMCases through Pass.MatMul against RefMatMul (weights seeded 100+i, x
// 200+i for case i), QGEMMCases (weights 20000+i, x 21000+i), then its bad-argument table.
func RunMatMul(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "MatMul")
	s.runEntries(t, be, matMulEntries())
	w, _, _ := RandMatrix(1, 4, 3, op.F32, 1)
	q, _, _ := RandQuant(2, 4, 64, 4, 32, op.BF16, 1)
	runBad(t, s, be, func(e *env) op.MatMul {
		return op.MatMul{Y: e.out("y", 8), X: e.f32(make([]float32, 6)), T: 2, W: w}
	}, op.Pass.MatMul, append([]badCase[op.MatMul]{
		{"nil_weight", errArg, func(e *env, a *op.MatMul) { a.W = nil }},
		{"short_x", errShape, func(e *env, a *op.MatMul) { a.X = e.shorter(a.X, 1) }},
		{"short_y", errShape, func(e *env, a *op.MatMul) { a.Y = e.shorter(a.Y, 1) }},
		{"negative_T", errShape, func(e *env, a *op.MatMul) { a.T = -1 }},
		{"x_I32", errDType, func(e *env, a *op.MatMul) { a.X = e.retyped(a.X) }},
		{"missing_y", errArg, func(e *env, a *op.MatMul) { a.Y = noTensor }},
		{"short_bf16_weight", errShape, func(e *env, a *op.MatMul) {
			a.W = &op.Matrix{N: 4, K: 3, DType: op.BF16, U16: make([]uint16, 11)}
		}},
		{"weight_dtype_I32", errDType, func(e *env, a *op.MatMul) {
			a.W = &op.Matrix{N: 4, K: 3, DType: op.I32, U16: make([]uint16, 12)}
		}},
		{"weight_zero_rows", errShape, func(e *env, a *op.MatMul) { a.W = &op.Matrix{N: 0, K: 3, DType: op.F32} }},
		{"quant_without_codes", errArg, func(e *env, a *op.MatMul) { a.W = &op.Matrix{N: 4, K: 64, DType: op.QAffine} }},
		{"quant_short_codes", errShape, func(e *env, a *op.MatMul) { a.W = quantWith(q, func(c *op.Quant) { c.Codes = c.Codes[1:] }) }},
		{"quant_short_scales", errShape, func(e *env, a *op.MatMul) { a.W = quantWith(q, func(c *op.Quant) { c.Scales = c.Scales[1:] }) }},
		{"quant_scales_F32", errDType, func(e *env, a *op.MatMul) { a.W = quantWith(q, func(c *op.Quant) { c.ScaleDType = op.F32 }) }},
		{"quant_7_bits", errUnsupported, func(e *env, a *op.MatMul) { a.W = quantWith(q, func(c *op.Quant) { c.Bits = 7 }) }},
		{"quant_group_16", errUnsupported, func(e *env, a *op.MatMul) { a.W = quantWith(q, func(c *op.Quant) { c.Group = 16 }) }},
		{"quant_group_not_dividing_K", errShape, func(e *env, a *op.MatMul) {
			a.W = quantWith(q, func(c *op.Quant) { c.Group = 128 })
		}},
	}, append(fpBadMatMul(), ggmlBadMatMul()...)...))
}

// matMulEntries are the MatMul table: GEMMCases, then QGEMMCases.
func matMulEntries() []entry {
	var es []entry
	for i, c := range GEMMCases() {
		es = append(es, gemmEntry(c.Name(), c.Short, c.T, c.N, c.K, Quant{}, c.DType, uint64(100+i), uint64(200+i)))
	}
	for i, c := range QGEMMCases() {
		es = append(es, gemmEntry(c.Name(), c.Short, c.T, c.N, c.K, c.Q, op.QAffine, uint64(20000+i), uint64(21000+i)))
	}
	return es
}

// gemmEntry is y [T, N] = x [T, K] W^T against RefMatMul: W [N, K] of dt (RandMatrix at scale
// 0.1 seeded wSeed; for QAffine RandQuant of q), handed to the env's weight store
// (Weights.Prepare: the matrix itself for a store of the zero options, its compute form for one
// of a compute mode), x Floats(xSeed, T*K, 1).
func gemmEntry(name string, short bool, T, N, K int, q Quant, dt op.DType, wSeed, xSeed uint64) entry {
	return entry{name: name, short: short, quant: dt == op.QAffine, flops: 2 * float64(T) * float64(N) * float64(K),
		bytes: weightBytes(N, K, dt, q) + 4*float64(T)*float64(N+K),
		build: func(e *env) (func(op.Pass) error, func(*testing.T, *suite)) {
			var w *op.Matrix
			if dt == op.QAffine {
				w = q.matrix(e.t, wSeed, N, K, 0.1)
			} else {
				w = mustMatrix(e.t, wSeed, N, K, dt, 0.1)
			}
			pw, err := e.w.Prepare(w)
			if err != nil {
				e.t.Fatal(err)
			}
			x := Floats(xSeed, T*K, 1)
			X, Y := e.f32(x), e.out("y", T*N)
			return func(p op.Pass) error { return p.MatMul(op.MatMul{Y: Y, X: X, T: T, W: pw}) },
				func(t *testing.T, s *suite) { s.close(t, "y", f32s(Y), RefMatMul(x, T, w)) }
		}}
}

// weightBytes is the size of a weight [N, K] of dt (for QAffine: the codes, scales and biases
// of q; the blocks of a GGML q).
func weightBytes(N, K int, dt op.DType, q Quant) float64 {
	n := float64(N) * float64(K)
	switch dt {
	case op.F32:
		return 4 * n
	case op.QAffine:
		if q.GG != 0 {
			return n / float64(q.GG.BlockSize()) * float64(q.GG.TypeSize())
		}
		return n*float64(q.Bits)/8 + 4*n/float64(q.Group)
	}
	return 2 * n
}

// RunRMSNorm runs NormCases (x seeded 300+i, w 400+i, eps 1e-6) against RefRMSNorm1p: S = 1
// through Pass.RMSNorm, out of place and in place (Y = X); the grouped form (S > 1) through
// GRWrite's Hn output with beta = u = 0 (the write leaves H unchanged): op.Pass has no grouped
// norm of its own, GRWrite and GRApplyMoEC produce it fused.
func RunRMSNorm(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "RMSNorm")
	for i, c := range NormCases() {
		x := Floats(uint64(300+i), c.T*c.S*c.D, 3)
		w := Floats(uint64(400+i), c.S*c.D, 0.5)
		want := func() []float64 { return RefRMSNorm1p(To64(x), c.S, c.D, w, eps) }
		if c.S > 1 {
			s.run(t, c.Name()+"/grouped", c.Short, func(t *testing.T) {
				e := newEnv(t, be)
				H, Hn := e.f32(x), e.out("Hn", len(x))
				a := op.GRWrite{H: H, Hn: Hn, Beta: e.f32(make([]float32, c.T*c.S)), U: e.f32(make([]float32, c.T*c.D)),
					T: c.T, S: c.S, D: c.D, Norm: w, Eps: eps}
				e.pass(func(p op.Pass) error { return p.GRWrite(a) })
				s.close(t, "y", f32s(Hn), want())
				exactF32(t, "H (beta = 0)", f32s(H), x)
			})
			continue
		}
		s.run(t, c.Name(), c.Short, func(t *testing.T) {
			e := newEnv(t, be)
			X, Y := e.f32(x), e.out("y", len(x))
			e.pass(func(p op.Pass) error { return p.RMSNorm(op.RMSNorm{Y: Y, X: X, Rows: c.T, D: c.D, W: w, Eps: eps}) })
			s.close(t, "y", f32s(Y), want())
			exactF32(t, "x", f32s(X), x)
		})
		s.run(t, c.Name()+"/in_place", c.Short, func(t *testing.T) {
			e := newEnv(t, be)
			X := e.f32(x)
			e.pass(func(p op.Pass) error { return p.RMSNorm(op.RMSNorm{Y: X, X: X, Rows: c.T, D: c.D, W: w, Eps: eps}) })
			s.close(t, "y", f32s(X), want())
		})
	}
	runBad(t, s, be, func(e *env) op.RMSNorm {
		return op.RMSNorm{Y: e.out("y", 8), X: e.f32(Floats(1, 8, 1)), Rows: 2, D: 4, W: make([]float32, 4), Eps: eps}
	}, op.Pass.RMSNorm, []badCase[op.RMSNorm]{
		{"short_x", errShape, func(e *env, a *op.RMSNorm) { a.X = e.shorter(a.X, 1) }},
		{"short_y", errShape, func(e *env, a *op.RMSNorm) { a.Y = e.shorter(a.Y, 4) }},
		{"short_w", errShape, func(e *env, a *op.RMSNorm) { a.W = a.W[:3] }},
		{"D_zero", errShape, func(e *env, a *op.RMSNorm) { a.D = 0 }},
		{"negative_rows", errShape, func(e *env, a *op.RMSNorm) { a.Rows = -2 }},
		{"eps_NaN", errArg, func(e *env, a *op.RMSNorm) { a.Eps = nan32 }},
		{"eps_negative", errArg, func(e *env, a *op.RMSNorm) { a.Eps = -1e-6 }},
		{"y_I32", errDType, func(e *env, a *op.RMSNorm) { a.Y = e.retyped(a.Y) }},
		{"missing_x", errArg, func(e *env, a *op.RMSNorm) { a.X = noTensor }},
	})
}

// eltSeed is the first seed of element-wise case i's inputs.
func eltSeed(i int) uint64 { return uint64(5000 + 10*i) }

// RunAdd runs EltCases through Pass.Add, with and without V, against H + U (+ V) in float64.
func RunAdd(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "Add")
	for i, c := range EltCases() {
		n, seed := c.T*c.D, eltSeed(i)
		h, u, v := Floats(seed, n, 2), Floats(seed+1, n, 2), Floats(seed+2, n, 1)
		for _, withV := range []bool{false, true} {
			s.run(t, fmt.Sprintf("%s/v%v", c.Name(), withV), c.Short, func(t *testing.T) {
				e := newEnv(t, be)
				H, U := e.f32(h), e.f32(u)
				a := op.Add{H: H, U: U}
				want := To64(h)
				for j := range want {
					want[j] += float64(u[j])
					if withV {
						want[j] += float64(v[j])
					}
				}
				if withV {
					a.V = e.f32(v)
				}
				e.pass(func(p op.Pass) error { return p.Add(a) })
				s.close(t, "h", f32s(H), want)
			})
		}
	}
	runBad(t, s, be, func(e *env) op.Add {
		return op.Add{H: e.f32(make([]float32, 6)), U: e.f32(Floats(1, 6, 1)), V: e.f32(Floats(2, 6, 1))}
	}, op.Pass.Add, []badCase[op.Add]{
		{"missing_H", errArg, func(e *env, a *op.Add) { a.H = noTensor }},
		{"missing_u", errArg, func(e *env, a *op.Add) { a.U = noTensor }},
		{"short_u", errShape, func(e *env, a *op.Add) { a.U = e.shorter(a.U, 1) }},
		{"long_v", errShape, func(e *env, a *op.Add) { a.V = e.shorter(a.V, -1) }},
		{"u_I32", errDType, func(e *env, a *op.Add) { a.U = e.retyped(a.U) }},
		{"H_I32", errDType, func(e *env, a *op.Add) { a.H = e.retyped(a.H) }},
	})
}

// RunSigmoidMul runs EltCases through Pass.SigmoidMul against o * sigmoid(g) in float64 (gates
// of scale 8: saturated and linear regions).
func RunSigmoidMul(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "SigmoidMul")
	s.runEntries(t, be, eltEntries(sigmoidMulEntry)())
	runBad(t, s, be, func(e *env) op.SigmoidMul {
		return op.SigmoidMul{O: e.f32(Floats(1, 5, 1)), G: e.f32(Floats(2, 5, 1))}
	}, op.Pass.SigmoidMul, []badCase[op.SigmoidMul]{
		{"missing_o", errArg, func(e *env, a *op.SigmoidMul) { a.O = noTensor }},
		{"missing_gate", errArg, func(e *env, a *op.SigmoidMul) { a.G = noTensor }},
		{"short_gate", errShape, func(e *env, a *op.SigmoidMul) { a.G = e.shorter(a.G, 1) }},
		{"gate_I32", errDType, func(e *env, a *op.SigmoidMul) { a.G = e.retyped(a.G) }},
	})
}

// eltEntries lists mk's entry of every EltCase (case i seeded eltSeed(i)).
func eltEntries(mk func(EltCase, uint64) entry) func() []entry {
	return func() []entry {
		var es []entry
		for i, c := range EltCases() {
			es = append(es, mk(c, eltSeed(i)))
		}
		return es
	}
}

// sigmoidMulEntry is SigmoidMul over [T, D]: o Floats(seed+3, 2), gates Floats(seed+4, 8).
func sigmoidMulEntry(c EltCase, seed uint64) entry {
	n := c.T * c.D
	return entry{name: c.Name(), short: c.Short, bytes: 12 * float64(n),
		build: func(e *env) (func(op.Pass) error, func(*testing.T, *suite)) {
			o0, g := Floats(seed+3, n, 2), Floats(seed+4, n, 8)
			O := e.f32(o0)
			a := op.SigmoidMul{O: O, G: e.f32(g)}
			return func(p op.Pass) error { return p.SigmoidMul(a) }, func(t *testing.T, s *suite) {
				want := make([]float64, n)
				for j := range want {
					want[j] = float64(o0[j]) * sigmoid64(float64(g[j]))
				}
				s.close(t, "o", f32s(O), want)
			}
		}}
}

// RunSwiGLU runs EltCases (rows T, I = D) through Pass.SwiGLU against RefSwiGLU.
func RunSwiGLU(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "SwiGLU")
	s.runEntries(t, be, eltEntries(swigluEntry)())
	s.runEntries(t, be, []entry{swigluSplitEntry(EltCase{T: 7, D: 40}, 71), swigluSplitEntry(EltCase{T: 33, D: 640}, 72)})
	runBad(t, s, be, func(e *env) op.SwiGLU {
		return op.SwiGLU{H: e.out("h", 8), GU: e.f32(Floats(1, 16, 1)), Rows: 2, I: 4}
	}, op.Pass.SwiGLU, []badCase[op.SwiGLU]{
		{"short_gu", errShape, func(e *env, a *op.SwiGLU) { a.GU = e.shorter(a.GU, 1) }},
		{"short_h", errShape, func(e *env, a *op.SwiGLU) { a.H = e.shorter(a.H, 1) }},
		{"I_zero", errShape, func(e *env, a *op.SwiGLU) { a.I = 0 }},
		{"negative_rows", errShape, func(e *env, a *op.SwiGLU) { a.Rows = -1 }},
		{"h_I32", errDType, func(e *env, a *op.SwiGLU) { a.H = e.retyped(a.H) }},
		{"missing_gu", errArg, func(e *env, a *op.SwiGLU) { a.GU = noTensor }},
	})
}

// swigluSplitEntry is SwiGLU with the gate and up products apart (op.SwiGLU.U) over c.T rows of
// I = c.D, against RefSwiGLU of the two interleaved per row.
func swigluSplitEntry(c EltCase, seed uint64) entry {
	return entry{name: "split_" + c.Name(), bytes: 12 * float64(c.T) * float64(c.D),
		build: func(e *env) (func(op.Pass) error, func(*testing.T, *suite)) {
			g, u := Floats(seed+5, c.T*c.D, 3), Floats(seed+6, c.T*c.D, 3)
			gu := make([]float32, 0, 2*c.T*c.D)
			for r := 0; r < c.T; r++ {
				gu = append(append(gu, g[r*c.D:(r+1)*c.D]...), u[r*c.D:(r+1)*c.D]...)
			}
			Hh := e.out("h", c.T*c.D)
			a := op.SwiGLU{H: Hh, GU: e.f32(g), U: e.f32(u), Rows: c.T, I: c.D}
			return func(p op.Pass) error { return p.SwiGLU(a) },
				func(t *testing.T, s *suite) { s.close(t, "h", f32s(Hh), RefSwiGLU(gu, c.T, c.D)) }
		}}
}

// swigluEntry is SwiGLU over c.T rows of I = c.D: gu Floats(seed+5, 3).
func swigluEntry(c EltCase, seed uint64) entry {
	return entry{name: c.Name(), short: c.Short, bytes: 12 * float64(c.T) * float64(c.D),
		build: func(e *env) (func(op.Pass) error, func(*testing.T, *suite)) {
			gu := Floats(seed+5, 2*c.T*c.D, 3)
			Hh := e.out("h", c.T*c.D)
			a := op.SwiGLU{H: Hh, GU: e.f32(gu), Rows: c.T, I: c.D}
			return func(p op.Pass) error { return p.SwiGLU(a) },
				func(t *testing.T, s *suite) { s.close(t, "h", f32s(Hh), RefSwiGLU(gu, c.T, c.D)) }
		}}
}

// RunRowSigmoidScale runs EltCases through Pass.RowSigmoidScale against x * sigmoid(s[row]).
func RunRowSigmoidScale(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "RowSigmoidScale")
	for i, c := range EltCases() {
		x, sc := Floats(eltSeed(i)+6, c.T*c.D, 2), Floats(eltSeed(i)+7, c.T, 3)
		s.run(t, c.Name(), c.Short, func(t *testing.T) {
			e := newEnv(t, be)
			X := e.f32(x)
			a := op.RowSigmoidScale{X: X, S: e.f32(sc), Rows: c.T, D: c.D}
			e.pass(func(p op.Pass) error { return p.RowSigmoidScale(a) })
			want := To64(x)
			for j := range want {
				want[j] *= sigmoid64(float64(sc[j/c.D]))
			}
			s.close(t, "x", f32s(X), want)
		})
	}
	runBad(t, s, be, func(e *env) op.RowSigmoidScale {
		return op.RowSigmoidScale{X: e.f32(Floats(1, 8, 1)), S: e.f32(Floats(2, 2, 1)), Rows: 2, D: 4}
	}, op.Pass.RowSigmoidScale, []badCase[op.RowSigmoidScale]{
		{"short_s", errShape, func(e *env, a *op.RowSigmoidScale) { a.S = e.shorter(a.S, 1) }},
		{"short_x", errShape, func(e *env, a *op.RowSigmoidScale) { a.X = e.shorter(a.X, 1) }},
		{"D_zero", errShape, func(e *env, a *op.RowSigmoidScale) { a.D = 0 }},
		{"s_I32", errDType, func(e *env, a *op.RowSigmoidScale) { a.S = e.retyped(a.S) }},
		{"missing_x", errArg, func(e *env, a *op.RowSigmoidScale) { a.X = noTensor }},
	})
}

// RunCopy runs EltCases through Pass.Copy for F32 and I32 tensors, whole and into a slice of a
// larger tensor (the elements around the slice must stay), requiring exact copies.
func RunCopy(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "Copy")
	for i, c := range EltCases() {
		n := c.T * c.D
		f := Floats(eltSeed(i)+8, n, 4)
		ints := Tokens(eltSeed(i)+9, n, 1<<30, 0, 0)
		s.run(t, c.Name()+"/F32", c.Short, func(t *testing.T) {
			e := newEnv(t, be)
			dst := e.out("dst", n)
			a := op.Copy{Dst: dst, Src: e.f32(f)}
			e.pass(func(p op.Pass) error { return p.Copy(a) })
			exactF32(t, "dst", f32s(dst), f)
		})
		s.run(t, c.Name()+"/I32_slice", c.Short, func(t *testing.T) {
			e := newEnv(t, be)
			around := Tokens(eltSeed(i)+10, n+12, 1<<30, 0, 0)
			big := e.i32(around)
			a := op.Copy{Dst: big.Slice(5, 5+n), Src: e.i32(ints)}
			e.pass(func(p op.Pass) error { return p.Copy(a) })
			want := append(append(append([]int32(nil), around[:5]...), ints...), around[5+n:]...)
			exactI32(t, "dst", i32s(big), want)
		})
	}
	runBad(t, s, be, func(e *env) op.Copy {
		return op.Copy{Dst: e.out("dst", 6), Src: e.f32(Floats(1, 6, 1))}
	}, op.Pass.Copy, []badCase[op.Copy]{
		{"missing_src", errArg, func(e *env, a *op.Copy) { a.Src = noTensor }},
		{"missing_dst", errArg, func(e *env, a *op.Copy) { a.Dst = noTensor }},
		{"short_dst", errShape, func(e *env, a *op.Copy) { a.Dst = e.shorter(a.Dst, 1) }},
		{"long_dst", errShape, func(e *env, a *op.Copy) { a.Dst = e.shorter(a.Dst, -1) }},
		{"dtype_mismatch", errDType, func(e *env, a *op.Copy) { a.Dst = e.retyped(a.Dst) }},
	})
}

// RunEmbed runs EmbedCases through Pass.Embed (table seeded 6000+i with scale 1, the first and
// last token ids among the tokens) and requires the widened rows, repeated into every stream,
// bit for bit; then QEmbedCases (table 22000+i, tokens 22500+i), whose rows must be the
// dequantized values (Dequant) bit for bit.
func RunEmbed(t *testing.T, be op.Backend, o Options) {
	s := newSuite(t, o, "Embed")
	for i, c := range EmbedCases() {
		s.run(t, c.Name(), c.Short, func(t *testing.T) {
			table := mustMatrix(t, uint64(6000+i), c.Vocab, c.D, c.DType, 1)
			s.embedCase(t, be, c.T, c.S, c.D, c.Vocab, table, uint64(6100+i))
		})
	}
	for i, c := range QEmbedCases() {
		s.runQ(t, c.Name(), c.Short, func(t *testing.T) {
			table := c.Q.matrix(t, uint64(22000+i), c.Vocab, c.D, 1)
			s.embedCase(t, be, c.T, c.S, c.D, c.Vocab, table, uint64(22500+i))
		})
	}
	table, _, _ := RandMatrix(1, 10, 4, op.BF16, 1)
	runBad(t, s, be, func(e *env) op.Embed {
		return op.Embed{H: e.out("H", 3*2*4), Tokens: e.i32([]int32{0, 9, 3}), T: 3, S: 2, Table: table}
	}, op.Pass.Embed, []badCase[op.Embed]{
		{"nil_table", errArg, func(e *env, a *op.Embed) { a.Table = nil }},
		{"S_zero", errShape, func(e *env, a *op.Embed) { a.S = 0 }},
		{"short_H", errShape, func(e *env, a *op.Embed) { a.H = e.shorter(a.H, 1) }},
		{"short_tokens", errShape, func(e *env, a *op.Embed) { a.Tokens = e.shorter(a.Tokens, 1) }},
		{"tokens_F32", errDType, func(e *env, a *op.Embed) { a.Tokens = e.retyped(a.Tokens) }},
		{"negative_T", errShape, func(e *env, a *op.Embed) { a.T = -1 }},
		{"value_token_past_vocab", errArg, func(e *env, a *op.Embed) { a.Tokens = e.i32([]int32{0, 10, 3}) }},
		{"value_negative_token", errArg, func(e *env, a *op.Embed) { a.Tokens = e.i32([]int32{-1, 1, 3}) }},
	})
}

// embedCase gathers T tokens (seeded tokSeed, the last and the first row among them) of table
// [vocab, D] into S streams and requires the widened rows bit for bit.
func (s *suite) embedCase(t *testing.T, be op.Backend, T, S, D, vocab int, table *op.Matrix, tokSeed uint64) {
	tok := Tokens(tokSeed, T, vocab, 0, 0)
	tok[0] = int32(vocab - 1)
	tok[T-1] = 0
	e := newEnv(t, be)
	Hh := e.out("H", T*S*D)
	a := op.Embed{H: Hh, Tokens: e.i32(tok), T: T, S: S, Table: table}
	e.pass(func(p op.Pass) error { return p.Embed(a) })
	wide := Widen(table)
	want := make([]float32, 0, T*S*D)
	for _, id := range tok {
		for range S {
			want = append(want, wide[int(id)*D:int(id+1)*D]...)
		}
	}
	exactF32(t, "H", f32s(Hh), want)
}
