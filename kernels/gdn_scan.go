package kernels

import (
	"github.com/stratakernels/strata/op"

	"math"
	"runtime"
	"slices"
)

// gdnScan is gdn_scan, the gated delta rule over T tokens for every value head h, with qk head
// j = h / (Hv/Hk) (op.Grouped) or h % Hk (op.Tiled):
//
//	S = exp(g_t) S;  delta = beta_t (v_t - S^T k_t);  S = S + k_t delta^T;  o_t = S^T q_t
//
// (transformers' torch_recurrent_gated_delta_rule). q, k [T, Hk, Dk] must already be
// normalised and q scaled (GDNPre or gdnNormQK); v [T, Hv, Dv]; g (log decay) and beta [T, Hv];
// state [Hv, Dk, Dv] float32 holds the initial state and receives the final one; o [T, Hv, Dv].
//
// op.Chunked computes, per chunk of C = op.GDNChunk tokens with G the in-chunk inclusive cumsum of g,
// Gamma_ij = exp(G_i - G_j) (formed as running products of exp(g_t) in float64) and L = strict_lower(diag(beta) K K^T .* Gamma):
//
//	Vn = (I + L)^-1 diag(beta) (V - diag(exp(G)) K S)     (forward substitution)
//	O  = diag(exp(G)) Q S + lower_incl(Q K^T .* Gamma) Vn
//	S' = exp(G_last) S + (K .* exp(G_last - G))^T Vn
//
// which is the WY form of the chunked kernel of flash-linear-attention / transformers'
// torch_chunk_gated_delta_rule, with W S folded into the right-hand side of the solve.
// K K^T and Q K^T depend only on the qk head, so they are computed once per chunk for the value
// heads that share it. op.Recurrent applies the recurrence token by token.
//
// Work is split over (qk head, value heads of that qk head); every head's arithmetic is the same
// whatever the split, so results are bitwise identical across runs and GOMAXPROCS. Decay factors
// below 1e-30 are flushed to zero (they are below float32 resolution of any term they multiply,
// and subnormal arithmetic is slow). o must not alias the inputs or the state.
//
// NaN and Inf are not scanned for (that would cost a pass over every input): a NaN in g, beta,
// q, k, v or the state propagates under IEEE rules into o and the final state of the value heads
// that read it, from that token on in op.Recurrent mode and from the start of its chunk in op.Chunked
// mode; other value heads are unaffected, and nothing panics.
//
// Errors wrap op.ErrShape (sizes, lengths, a tensor over op.MaxElems) or op.ErrInvalidArgument (Hv not a multiple of
// Hk, unknown Map or mode).
func gdnScan(o, state []float32, q, k, v, g, beta []float32, p op.GDNParams, mode op.ScanMode) error {
	h := op.HostF32
	return execGDNScan(op.GDNScan{O: h(o), State: h(state), Q: h(q), K: h(k), V: h(v), G: h(g), Beta: h(beta), P: p, Mode: mode})
}

func execGDNScan(a op.GDNScan) error {
	if err := a.Check(); err != nil {
		return err
	}
	p, mode := a.P, a.Mode
	if mode == op.ScanAuto {
		mode = op.Chunked
	}
	o, state, q, k, v, g, beta := a.O.F32(), a.State.F32(), a.Q.F32(), a.K.F32(), a.V.F32(), a.G.F32(), a.Beta.F32()
	T := p.T
	if a.NormQK {
		q, k = slices.Clone(q), slices.Clone(k)
		if err := gdnNormQK(q, k, T, p.Hk, p.Dk); err != nil {
			return err
		}
	}
	r := p.Hv / p.Hk
	// Units are (qk head, slice of its value heads). Slicing a group only when there are fewer
	// qk heads than workers keeps the shared K K^T / Q K^T products shared where it pays.
	nsplit := 1
	if w := runtime.GOMAXPROCS(0); p.Hk < w {
		nsplit = min(r, (w+p.Hk-1)/p.Hk)
	}
	parallelFor(p.Hk*nsplit, 1, func(lo, hi int) {
		var ws *gdnScratch
		var delta []float32
		if mode == op.Chunked {
			ws = newGDNScratch(p)
		} else {
			delta = make([]float32, p.Dv)
		}
		for u := lo; u < hi; u++ {
			j, part := u/nsplit, u%nsplit
			m0, m1 := part*r/nsplit, (part+1)*r/nsplit
			if mode == op.Recurrent {
				for m := m0; m < m1; m++ {
					gdnRecurrentHead(o, state, q, k, v, g, beta, delta, p, j, p.ValueHead(j, m))
				}
				continue
			}
			for t0 := 0; t0 < T; t0 += op.GDNChunk {
				c := min(op.GDNChunk, T-t0)
				ws.loadQK(q, k, p, j, t0, c)
				for m := m0; m < m1; m++ {
					ws.chunk(o, state, v, g, beta, p, p.ValueHead(j, m), t0, c)
				}
			}
		}
	})
	return nil
}

// gdnExp is exp rounded to float32, flushed to zero below 1e-30.
func gdnExp(x float64) float32 { return gdnFlush(math.Exp(x)) }

// gdnFlush rounds a decay factor to float32, flushing it to zero below 1e-30.
func gdnFlush(e float64) float32 {
	if e < 1e-30 {
		return 0
	}
	return float32(e)
}

// gdnRecurrentHead runs the token-by-token recurrence of value head h (qk head j); delta is
// [Dv] scratch.
func gdnRecurrentHead(o, state, q, k, v, g, beta, delta []float32, p op.GDNParams, j, h int) {
	Dk, Dv, Hk, Hv := p.Dk, p.Dv, p.Hk, p.Hv
	S := state[h*Dk*Dv : (h+1)*Dk*Dv]
	for t := 0; t < p.T; t++ {
		kt := k[(t*Hk+j)*Dk : (t*Hk+j+1)*Dk]
		qt := q[(t*Hk+j)*Dk : (t*Hk+j+1)*Dk]
		vt := v[(t*Hv+h)*Dv : (t*Hv+h+1)*Dv]
		ot := o[(t*Hv+h)*Dv : (t*Hv+h+1)*Dv]
		decay := gdnExp(float64(g[t*Hv+h]))
		bt := beta[t*Hv+h]
		// Pass 1: decay S and accumulate kv = S^T k into delta.
		clear(delta)
		for i, ki := range kt {
			row := S[i*Dv : (i+1)*Dv]
			for d := range row {
				x := row[d] * decay
				row[d] = x
				delta[d] += ki * x
			}
		}
		for d := range delta {
			delta[d] = bt * (vt[d] - delta[d])
		}
		// Pass 2: rank-1 update and o = S^T q.
		clear(ot)
		for i, ki := range kt {
			row := S[i*Dv : (i+1)*Dv]
			qi := qt[i]
			for d := range row {
				x := row[d] + ki*delta[d]
				row[d] = x
				ot[d] += qi * x
			}
		}
	}
}

// gdnBlk is the row block of the triangular solves: rows of a block first take the
// contributions of all earlier blocks as one product (6-row panels), then those of the rows
// before them inside the block one row at a time. The order of every sum stays j = 0, 1, ...
const gdnBlk = 6

// gdnScratch is one worker's chunk buffers, allocated once per GDNScan call.
type gdnScratch struct {
	Dk, Dv int
	qk     []float32  // [2C, Dk]: rows 0..c-1 Q of the chunk, rows c..2c-1 K
	kT     []float32  // [Dk, c]: K^T of the chunk
	qkk    []float32  // [2c, c]: Q K^T then K K^T
	xs     []float32  // [2c, Dv]: [Q; K] S
	vn     []float32  // [C, Dv]
	kd     []float32  // [C, Dk]: K .* exp(G_last - G) (row-wise)
	lmat   []float32  // [C, C]: -beta_i (K K^T)_ij Gamma_ij (strictly lower)
	pmat   []float32  // [C, C]: (Q K^T)_ij Gamma_ij (lower incl.)
	gam    []float32  // [C, C] lower incl.: Gamma
	eG     []float32  // [C]: exp(G)
	g64    []float64  // [C]: running row of Gamma in float64
	kTRows []*float32 // row tables of the products' right-hand sides
	sRows  []*float32
	vnRows []*float32
}

func newGDNScratch(p op.GDNParams) *gdnScratch {
	const C = op.GDNChunk
	ws := &gdnScratch{
		Dk: p.Dk, Dv: p.Dv,
		qk: make([]float32, 2*C*p.Dk), kT: make([]float32, p.Dk*C), qkk: make([]float32, 2*C*C),
		xs: make([]float32, 2*C*p.Dv), vn: make([]float32, C*p.Dv), kd: make([]float32, C*p.Dk),
		lmat: make([]float32, C*C), pmat: make([]float32, C*C),
		gam: make([]float32, C*C), eG: make([]float32, C), g64: make([]float64, C),
		kTRows: make([]*float32, p.Dk), sRows: make([]*float32, p.Dk), vnRows: make([]*float32, C),
	}
	fmaRowTable(ws.vnRows, ws.vn, p.Dv, p.Dv)
	return ws
}

// loadQK gathers the chunk's rows of qk head j and forms [Q; K] K^T (rows of stride c): Q K^T
// in rows 0..c-1, K K^T in rows c..2c-1 (only their lower triangles are read).
func (ws *gdnScratch) loadQK(q, k []float32, p op.GDNParams, j, t0, c int) {
	Dk, Hk := p.Dk, p.Hk
	for i := 0; i < c; i++ {
		src := ((t0+i)*Hk + j) * Dk
		copy(ws.qk[i*Dk:(i+1)*Dk], q[src:src+Dk])
		ki := k[src : src+Dk]
		copy(ws.qk[(c+i)*Dk:(c+i+1)*Dk], ki)
		for d, x := range ki {
			ws.kT[d*c+i] = x
		}
	}
	fmaRowTable(ws.kTRows, ws.kT, c, c)
	qkk := ws.qkk[:2*c*c]
	clear(qkk)
	fmaGemm(qkk, c, ws.qk, Dk, 1, ws.kTRows, 2*c, c, Dk)
}

// gdnTriAcc adds to rows 0..c-1 of X (stride ld, n columns) the lower-triangular product
// sum_{j < i+incl} A[i*lda + j] R_j, R_j = *rows[j]. With incl = 0 the R_j may be the rows of
// X itself (forward substitution): a row is final before any later row reads it.
func gdnTriAcc(x []float32, ld int, a []float32, lda int, rows []*float32, c, n, incl int) {
	for i0 := 0; i0 < c; i0 += gdnBlk {
		i1 := min(i0+gdnBlk, c)
		fmaGemm(x[i0*ld:], ld, a[i0*lda:], lda, 1, rows, i1-i0, n, i0)
		for i := i0; i < i1; i++ {
			kk := i + incl - i0
			if kk > 0 {
				fmaRow(x[i*ld:i*ld+n], a[i*lda+i0:], 1, rows[i0:i0+kk])
			}
		}
	}
}

// chunk advances value head h over tokens t0..t0+c-1 (loadQK done for its qk head).
func (ws *gdnScratch) chunk(o, state, v, g, beta []float32, p op.GDNParams, h, t0, c int) {
	const C = op.GDNChunk
	Dk, Dv, Hv := p.Dk, p.Dv, p.Hv
	S := state[h*Dk*Dv : (h+1)*Dk*Dv]

	// Decays as running products of exp(g) in float64 (c exponentials per chunk instead of c^2/2):
	// after row i, g64[jj] = exp(G_i - G_jj) = Gamma_i,jj and eg = exp(G_i).
	eg := 1.0
	for i := 0; i < c; i++ {
		e := math.Exp(float64(g[(t0+i)*Hv+h]))
		eg *= e
		ws.eG[i] = gdnFlush(eg)
		g64 := ws.g64[:i+1]
		g64[i] = 1
		row := ws.gam[i*C : i*C+i+1]
		for jj := 0; jj < i; jj++ {
			g64[jj] *= e
			row[jj] = gdnFlush(g64[jj])
		}
		row[i] = 1
	}

	// [Q; K] S.
	fmaRowTable(ws.sRows, S, Dv, Dv)
	xs := ws.xs[:2*c*Dv]
	clear(xs)
	fmaGemm(xs, Dv, ws.qk, Dk, 1, ws.sRows, 2*c, Dv, Dk)

	// Right-hand side beta_i (v_i - exp(G_i) (K S)_i), then forward substitution with L.
	for i := 0; i < c; i++ {
		bi := beta[(t0+i)*Hv+h]
		ei := ws.eG[i]
		vi := v[((t0+i)*Hv+h)*Dv : ((t0+i)*Hv+h+1)*Dv]
		ks := ws.xs[(c+i)*Dv : (c+i+1)*Dv]
		gdnRHS(ws.vn[i*Dv:(i+1)*Dv], vi, ks, bi, ei)
		lrow, pr := ws.lmat[i*C:i*C+i], ws.pmat[i*C:i*C+i+1]
		kk, qq, gam := ws.qkk[(c+i)*c:(c+i)*c+i], ws.qkk[i*c:i*c+i+1], ws.gam[i*C:i*C+i+1]
		for jj := range lrow {
			lrow[jj] = -bi * kk[jj] * gam[jj]
		}
		for jj := range pr {
			pr[jj] = qq[jj] * gam[jj]
		}
	}
	gdnTriAcc(ws.vn, Dv, ws.lmat, C, ws.vnRows, c, Dv, 0)

	// O = diag(exp(G)) Q S + lower_incl(Q K^T .* Gamma) Vn, written in place in o (row stride
	// Hv*Dv).
	ob := o[(t0*Hv+h)*Dv:]
	for i := 0; i < c; i++ {
		ei := ws.eG[i]
		qs := ws.xs[i*Dv : (i+1)*Dv]
		gdnScaleCopy(ob[i*Hv*Dv:i*Hv*Dv+Dv], qs, ei)
	}
	gdnTriAcc(ob, Hv*Dv, ws.pmat, C, ws.vnRows, c, Dv, 1)

	// S' = exp(G_last) S + (K .* exp(G_last - G))^T Vn; the transposed product reads kd with
	// strides (1, Dk).
	for i := 0; i < c; i++ {
		f := ws.gam[(c-1)*C+i] // exp(G_last - G_i)
		ki := ws.qk[(c+i)*Dk : (c+i+1)*Dk]
		gdnScaleCopy(ws.kd[i*Dk:(i+1)*Dk], ki, f)
	}
	switch s := ws.eG[c-1]; s {
	case 0:
		clear(S)
	case 1:
	default:
		gdnScaleCopy(S, S, s)
	}
	fmaGemm(S, Dv, ws.kd, 1, Dk, ws.vnRows, Dk, Dv, c)
}

// gdnScaleCopy sets dst = s*src (len(dst) elements; dst may be src).
func gdnScaleCopy(dst, src []float32, s float32) {
	src = src[:len(dst)]
	n8 := 0
	if useAsmVec() {
		if n8 = len(dst) &^ 7; n8 > 0 {
			gdnScaleCopy8(&dst[0], &src[0], n8, s)
		}
	}
	for i := n8; i < len(dst); i++ {
		dst[i] = s * src[i]
	}
}

// gdnRHS sets dst = b*(v - e*ks), the right-hand side of the chunk's triangular solve.
func gdnRHS(dst, v, ks []float32, b, e float32) {
	v, ks = v[:len(dst)], ks[:len(dst)]
	n8 := 0
	if useAsmVec() {
		if n8 = len(dst) &^ 7; n8 > 0 {
			gdnRHS8(&dst[0], &v[0], &ks[0], n8, b, e)
		}
	}
	for i := n8; i < len(dst); i++ {
		dst[i] = b * (v[i] - e*ks[i])
	}
}
