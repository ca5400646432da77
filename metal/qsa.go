package metal

import (
	"fmt"
	"math"

	"github.com/stratakernels/strata/op"
)

// Host side of qsa.metal: the QSA preparation and indexer kernels.

// ropeKey names one cached RoPE table.
type ropeKey struct {
	rot   int
	theta float64
}

// ropeTable returns rope[pos, j] = (cos, sin)(pos * theta^(-2j/rot)) for pos < n, j < rot/2, as
// [n, rot] float32: the angles, cos and sin are evaluated in float64 and rounded once, as
// the CPU backend's RoPE evaluates them. Tables are cached per (rot, theta) and grown on demand.
func (b *Backend) ropeTable(rot int, theta float64, n int) []float32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rope == nil {
		b.rope = map[ropeKey][]float32{}
	}
	k := ropeKey{rot, theta}
	tab := b.rope[k]
	have := len(tab) / rot
	if have >= n {
		return tab[:n*rot]
	}
	half := rot / 2
	invFreq := op.RoPEInvFreq(rot, theta)
	grow := max(n, 2*have, 256)
	out := make([]float32, grow*rot)
	copy(out, tab)
	for p := have; p < grow; p++ {
		for j := 0; j < half; j++ {
			a := float64(p) * invFreq[j]
			out[p*rot+2*j] = float32(math.Cos(a))
			out[p*rot+2*j+1] = float32(math.Sin(a))
		}
	}
	b.rope[k] = out
	return out[:n*rot]
}

// QSAPrep implements op.Pass with qsa_prep: q = RoPE(RMSNorm1p(query; qNorm)) and gate from qg,
// and the cache rows pos0 .. pos0+T-1 of kc = RoPE(RMSNorm1p(k; kNorm)) and vc = v. RoPE at
// positions pos0+t over the first rot dims (rotate_half pairs), cos/sin from a float64 table;
// norms in float32 (agreement with the CPU's float64 norm about 1e-6 relative).
func (j *Pass) QSAPrep(a op.QSAPrep) error {
	const opName = "qsa_prep"
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	nkv := (a.Pos0 + a.T) * a.Hkv * a.D
	if err := guard32(opName, 2*a.T*a.Hq*a.D, nkv, (a.Pos0+a.T)*a.Rot); err != nil {
		return j.fail(err)
	}
	q, gate, kc, vc := j.dev("q", a.Q), j.dev("gate", a.Gate), j.dev("k cache", a.KC), j.dev("v cache", a.VC)
	qg, k, v := j.dev("qg", a.QG), j.dev("k", a.K), j.dev("v", a.V)
	if j.err != nil {
		return j.err
	}
	return j.qsaPrep(q, gate, kc, vc, qg, k, v, j.vec(a.QNorm), j.vec(a.KNorm), j.rope(a.Rot, a.Theta, a.Pos0+a.T),
		a.T, a.Hq, a.Hkv, a.D, a.Rot, a.Pos0, a.Pos0, a.Eps)
}

// rope returns the RoPE table of at least n positions on the device: the Backend's whole cached
// table, so that its device copy is reused until the table grows.
func (j *Pass) rope(rot int, theta float64, n int) *Tensor {
	tab := j.b.ropeTable(rot, theta, n)
	return j.vec(tab[:cap(tab)])
}

func (j *Pass) qsaPrep(bq, bg, bk, bv, bqg, bkr, bvr, bqn, bkn, brope *Tensor, T, Hq, Hkv, D, rot, pos0, row0 int, eps float32) error {
	pipe, err := j.b.pipeline("qsa.metal", "qsa_prep", nil)
	if err != nil {
		return j.fail(err)
	}
	nt := fitWidth(pipe, elemThreads(D))
	j.dispatch(pipe, fmt.Sprintf("qsa_prep_f32_d%d_rot%d_tg%d", D, rot, nt), [3]int{Hq + Hkv, T, 1}, [3]int{nt, 1, 1}, 0,
		bq, bg, bk, bv, bqg, bkr, bvr, bqn, bkn, brope, paramBytes(qsaPrepParams{T: T, Hq: Hq, Hkv: Hkv, D: D, Rot: rot, Pos0: pos0, Row0: row0, Eps: eps}))
	return j.err
}

// QSAIndex implements op.Pass with qsa_index_prep (the prepared queries and the raw-key append),
// then qsa_block_keys, qsa_scores and qsa_select (a radix select per row) for the sparse rows of
// the plan. Block keys and scores are float32 (the CPU op computes block keys in float64), so
// blocks whose scores agree to about 1e-6 relative may rank differently than on the CPU.
func (j *Pass) QSAIndex(a op.QSAIndex) error {
	const opName = "qsa_index"
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	p := a.P
	if err := guard32(opName, (p.Pos0+p.T)*p.Dim, p.T*(p.NHeads+1)*p.Dim, p.T*((p.Pos0+p.T)/p.Ratio+1), (p.Pos0+p.T)*p.T,
		(p.Pos0+p.T)*p.Rot); err != nil {
		return j.fail(err)
	}
	tok, iq, keys, iqk := j.dev("tokens", a.Tok), j.dev("iq", a.IQ), j.dev("index keys", a.Keys), j.dev("iqk", a.IQK)
	if j.err != nil {
		return j.err
	}
	return j.qsaIndex(a.Plan, tok, iq, keys, iqk, j.vec(a.QNorm), j.vec(a.KNorm), j.rope(p.Rot, p.Theta, p.Pos0+p.T), p)
}

// qsaIndex encodes the indexer; with biqk == nil bq already holds prepared queries.
func (j *Pass) qsaIndex(plan *op.Selection, btok, bq, bkeys, biqk, bqn, bkn, brope *Tensor, p op.IndexerParams) error {
	b := j.b
	var pipes [4]mtlPipeline
	for i, fn := range []string{"qsa_index_prep", "qsa_block_keys", "qsa_scores", "qsa_select"} {
		pp, err := b.pipeline("qsa.metal", fn, nil)
		if err != nil {
			return j.fail(err)
		}
		pipes[i] = pp
	}
	total := int(plan.Offsets[p.T])
	nbmax := 0
	for t := 0; t < p.T; t++ {
		if !plan.Dense[t] {
			nbmax = (p.Pos0 + t + 1) / p.Ratio
		}
	}
	keep := p.Budget / p.Ratio
	prm := paramBytes(qsaIndexParams{T: p.T, Pos0: p.Pos0, Row0: p.Pos0, Nh: p.NHeads, Dim: p.Dim, Ratio: p.Ratio, Rot: p.Rot, Keep: keep, Nbmax: nbmax, Eps: p.Eps, Scale: float32(1 / math.Sqrt(float64(p.Dim)))})
	nt := elemThreads(p.Dim)
	if biqk != nil {
		j.dispatch(pipes[0], fmt.Sprintf("qsa_index_prep_f32_dim%d_rot%d_tg%d", p.Dim, p.Rot, nt), [3]int{p.NHeads + 1, p.T, 1}, [3]int{nt, 1, 1}, 0,
			bq, bkeys, biqk, bqn, brope, prm)
	}
	if total > 0 {
		// Every layer of a pass has the same plan, so the host-written offsets may share one tensor.
		boff := j.tmpI32("qsa offsets", p.T+1)
		if boff != nil {
			copy(boff.I32(), plan.Offsets)
		}
		bbk, bsc := j.tmp("qsa block keys", nbmax*p.Dim), j.tmp("qsa scores", p.T*nbmax)
		j.dispatch(pipes[1], fmt.Sprintf("qsa_block_keys_f32_dim%d_r%d_tg%d", p.Dim, p.Ratio, nt), [3]int{nbmax, 1, 1}, [3]int{nt, 1, 1}, 4*p.Dim,
			bbk, bkeys, bkn, brope, prm)
		j.dispatch(pipes[2], fmt.Sprintf("qsa_scores_f32_h%d_dim%d", p.NHeads, p.Dim), [3]int{(nbmax + 255) / 256, p.T, 1}, [3]int{256, 1, 1}, 0,
			bsc, bq, bbk, prm)
		j.dispatch(pipes[3], "qsa_select_radix32_tg256", [3]int{p.T, 1, 1}, [3]int{256, 1, 1}, 0,
			btok, bsc, boff, prm)
	}
	return j.err
}
