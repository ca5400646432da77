package metal

import (
	"fmt"
	"math"

	"github.com/stratakernels/strata/kernels"
)

// Host side of the QSA preparation and indexer kernels of qsa_prompt.metal.

// ropeKey names one cached RoPE table.
type ropeKey struct {
	rot   int
	theta float64
}

// ropeTable returns rope[pos, j] = (cos, sin)(pos * theta^(-2j/rot)) for pos < n, j < rot/2, as
// [n, rot] float32: the angles, cos and sin are evaluated in float64 and rounded once, as
// kernels.RoPE evaluates them. Tables are cached per (rot, theta) and grown on demand.
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
	invFreq := make([]float64, half)
	for j := range invFreq {
		invFreq[j] = math.Pow(theta, -float64(2*j)/float64(rot))
	}
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

func ropeArgs(op string, D, rot, pos0, T int, theta float64) error {
	if rot <= 0 || rot > D || rot%2 != 0 {
		return fmt.Errorf("%s: %w: rot=%d with head dim %d (want even, 0 < rot <= dim)", op, kernels.ErrArg, rot, D)
	}
	if !(theta > 0) || math.IsInf(theta, 0) {
		return fmt.Errorf("%s: %w: theta=%g", op, kernels.ErrArg, theta)
	}
	if pos0 < 0 {
		return fmt.Errorf("%s: %w: pos0=%d", op, kernels.ErrArg, pos0)
	}
	return guard32(op, (pos0+T)*rot)
}

// QSAPrep is qsa_prep: the attention layer's step between the projections and qsa_flash
// (kernels.RMSNorm1pRoPE on the query and key heads plus the query/gate split and the cache
// append). qg [T, Hq, 2D] is q_proj's output ([query | gate] per head), k, v [T, Hkv, D] the
// k_proj and v_proj outputs. Writes q = RoPE(RMSNorm1p(query; qNorm)) and gate [T, Hq, D], and
// the cache rows pos0 .. pos0+T-1 of kc = RoPE(RMSNorm1p(k; kNorm)) and vc = v (kc, vc
// [>= pos0+T, Hkv, D]; earlier rows are not touched). RoPE at positions pos0+t over the first
// rot dims (rotate_half pairs), cos/sin from a float64 table; norms in float32 (agreement with
// the CPU's float64 norm about 1e-6 relative). Errors wrap kernels.ErrShape or kernels.ErrArg.
func (b *Backend) QSAPrep(q, gate, kc, vc, qg, k, v, qNorm, kNorm []float32, T, Hq, Hkv, D, rot, pos0 int,
	theta float64, eps float32) error {
	const op = "qsa_prep"
	if T <= 0 || Hq <= 0 || Hkv <= 0 || D <= 0 {
		return fmt.Errorf("%s: %w: T=%d Hq=%d Hkv=%d D=%d must be positive", op, kernels.ErrShape, T, Hq, Hkv, D)
	}
	if err := ropeArgs(op, D, rot, pos0, T, theta); err != nil {
		return err
	}
	if err := checkEps(op, eps); err != nil {
		return err
	}
	nkv := (pos0 + T) * Hkv * D
	if err := checkLens(op, lenCheck{"q", q, T * Hq * D}, lenCheck{"gate", gate, T * Hq * D},
		lenCheck{"qg", qg, 2 * T * Hq * D}, lenCheck{"k", k, T * Hkv * D}, lenCheck{"v", v, T * Hkv * D},
		lenCheck{"qNorm", qNorm, D}, lenCheck{"kNorm", kNorm, D}); err != nil {
		return err
	}
	if len(kc) < nkv || len(vc) < nkv {
		return fmt.Errorf("%s: %w: cache of %d/%d elements, rows up to %d need %d", op, kernels.ErrShape, len(kc), len(vc), pos0+T, nkv)
	}
	if err := guard32(op, 2*T*Hq*D, nkv); err != nil {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	bq, bg := j.alloc(len(q)), j.alloc(len(gate))
	// The host-slice form keeps only this call's rows on the device (cache row 0 = token 0).
	bk, bv := j.alloc(T*Hkv*D), j.alloc(T*Hkv*D)
	if err := j.qsaPrep(bq, bg, bk, bv, j.f32(qg), j.f32(k), j.f32(v), j.f32(qNorm), j.f32(kNorm),
		j.f32(b.ropeTable(rot, theta, pos0+T)), T, Hq, Hkv, D, rot, pos0, 0, eps); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(q, f32view(bq, len(q)))
	copy(gate, f32view(bg, len(gate)))
	copy(kc[pos0*Hkv*D:nkv], f32view(bk, T*Hkv*D))
	copy(vc[pos0*Hkv*D:nkv], f32view(bv, T*Hkv*D))
	return nil
}

// QSAPrep encodes qsa_prep (Backend.QSAPrep on device tensors): q, gate [T, Hq, D] from qg, and
// the cache rows pos0 .. pos0+T-1 of kc, vc [>= pos0+T, Hkv, D] from k, v; qNorm and kNorm
// [D] are model weights. Errors wrap kernels.ErrShape or kernels.ErrArg.
func (j *Pass) QSAPrep(q, gate, kc, vc, qg, k, v *Tensor, qNorm, kNorm []float32, T, Hq, Hkv, D, rot, pos0 int,
	theta float64, eps float32) error {
	const op = "qsa_prep"
	if T <= 0 || Hq <= 0 || Hkv <= 0 || D <= 0 || len(qNorm) != D || len(kNorm) != D {
		return j.fail(fmt.Errorf("%s: %w: T=%d Hq=%d Hkv=%d D=%d", op, kernels.ErrShape, T, Hq, Hkv, D))
	}
	if err := ropeArgs(op, D, rot, pos0, T, theta); err != nil {
		return j.fail(err)
	}
	if err := checkEps(op, eps); err != nil {
		return j.fail(err)
	}
	nkv := (pos0 + T) * Hkv * D
	if q.Len() < T*Hq*D || gate.Len() < T*Hq*D || qg.Len() < 2*T*Hq*D || k.Len() < T*Hkv*D || v.Len() < T*Hkv*D ||
		kc.Len() < nkv || vc.Len() < nkv {
		return j.fail(fmt.Errorf("%s: %w: tensors too small for T=%d pos0=%d", op, kernels.ErrShape, T, pos0))
	}
	return j.qsaPrep(q, gate, kc, vc, qg, k, v, j.vec(qNorm), j.vec(kNorm), j.rope(rot, theta, pos0+T), T, Hq, Hkv, D, rot, pos0, pos0, eps)
}

// rope returns the RoPE table of at least n positions on the device: the Backend's whole cached
// table, so that its device copy is reused until the table grows.
func (j *Pass) rope(rot int, theta float64, n int) *Tensor {
	tab := j.b.ropeTable(rot, theta, n)
	return j.vec(tab[:cap(tab)])
}

func (j *Pass) qsaPrep(bq, bg, bk, bv, bqg, bkr, bvr, bqn, bkn, brope *Tensor, T, Hq, Hkv, D, rot, pos0, row0 int, eps float32) error {
	pipe, err := j.b.pipeline("qsa_prompt.metal", "qsa_prep", nil)
	if err != nil {
		return j.fail(err)
	}
	nt := elemThreads(D)
	j.dispatch(pipe, fmt.Sprintf("qsa_prep_f32_d%d_rot%d_tg%d", D, rot, nt), [3]int{Hq + Hkv, T, 1}, [3]int{nt, 1, 1}, 0,
		bq, bg, bk, bv, bqg, bkr, bvr, bqn, bkn, brope, params(T, Hq, Hkv, D, rot, pos0, row0, eps))
	return j.err
}

func qsaIndexCheck(op string, sel *kernels.Selection, rawKeys, kNorm []float32, p kernels.IndexerParams) error {
	if sel == nil {
		return fmt.Errorf("%s: %w: nil selection", op, kernels.ErrArg)
	}
	if p.T <= 0 || p.NHeads <= 0 || p.Dim <= 0 || p.Ratio <= 0 {
		return fmt.Errorf("%s: %w: T=%d NHeads=%d Dim=%d Ratio=%d must be positive", op, kernels.ErrShape, p.T, p.NHeads, p.Dim, p.Ratio)
	}
	if p.Budget < p.Ratio {
		return fmt.Errorf("%s: %w: budget %d below one block of %d tokens", op, kernels.ErrArg, p.Budget, p.Ratio)
	}
	if err := ropeArgs(op, p.Dim, p.Rot, p.Pos0, p.T, p.Theta); err != nil {
		return err
	}
	if err := checkEps(op, p.Eps); err != nil {
		return err
	}
	if len(rawKeys) < (p.Pos0+p.T)*p.Dim || len(rawKeys)%p.Dim != 0 || len(kNorm) != p.Dim {
		return fmt.Errorf("%s: %w: len(rawKeys)=%d (want a multiple of %d holding %d rows), len(kNorm)=%d",
			op, kernels.ErrShape, len(rawKeys), p.Dim, p.Pos0+p.T, len(kNorm))
	}
	return guard32(op, (p.Pos0+p.T)*p.Dim, p.T*(p.NHeads+1)*p.Dim, p.T*((p.Pos0+p.T)/p.Ratio+1), (p.Pos0+p.T)*p.T)
}

// QSASelect is the QSA indexer's selection on the device (kernels.QSASelect: same arguments and
// contract): qsa_block_keys, qsa_scores and qsa_select in one command buffer. q [T, NHeads, Dim]
// are the prepared index queries, rawKeys [>= Pos0+T, Dim] the raw index keys. Block keys and
// scores are float32 (the CPU op computes block keys in float64), so blocks whose scores agree to
// about 1e-6 relative may rank differently. Errors wrap kernels.ErrShape or kernels.ErrArg; sel
// is not modified on error.
func (b *Backend) QSASelect(sel *kernels.Selection, q, rawKeys, kNorm []float32, p kernels.IndexerParams) error {
	const op = "qsa_select"
	if err := qsaIndexCheck(op, sel, rawKeys, kNorm, p); err != nil {
		return err
	}
	if len(q) != p.T*p.NHeads*p.Dim {
		return fmt.Errorf("%s: %w: len(q)=%d, want %d", op, kernels.ErrShape, len(q), p.T*p.NHeads*p.Dim)
	}
	return b.qsaIndex(sel, q, rawKeys, nil, nil, kNorm, p)
}

// QSAIndex is the whole QSA indexer of a prefill chunk on the device (qsa_index_prep, then
// QSASelect's kernels), in one command buffer: from iqk [T, NHeads+1, Dim] (index_qk_proj's
// output: the query heads, then the raw key) it writes the prepared queries
// iq [T, NHeads, Dim] = RoPE(RMSNorm1p(query; qNorm)) at positions Pos0+t, appends the raw keys
// into rawKeys rows Pos0 .. Pos0+T-1 ([>= Pos0+T, Dim]), and fills sel as kernels.QSASelect.
// Errors wrap kernels.ErrShape or kernels.ErrArg.
func (b *Backend) QSAIndex(sel *kernels.Selection, iq, rawKeys, iqk, qNorm, kNorm []float32, p kernels.IndexerParams) error {
	const op = "qsa_index"
	if err := qsaIndexCheck(op, sel, rawKeys, kNorm, p); err != nil {
		return err
	}
	if err := checkLens(op, lenCheck{"iq", iq, p.T * p.NHeads * p.Dim}, lenCheck{"iqk", iqk, p.T * (p.NHeads + 1) * p.Dim},
		lenCheck{"qNorm", qNorm, p.Dim}); err != nil {
		return err
	}
	return b.qsaIndex(sel, iq, rawKeys, iqk, qNorm, kNorm, p)
}

// qsaIndex runs the indexer; with iqk == nil q holds prepared queries (QSASelect), else q
// receives them (QSAIndex).
func (b *Backend) qsaIndex(sel *kernels.Selection, q, rawKeys, iqk, qNorm, kNorm []float32, p kernels.IndexerParams) error {
	plan := QSAPlan(p)
	n := p.Pos0 + p.T
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	bkeys := j.f32(rawKeys[:n*p.Dim])
	btok := j.alloc(len(plan.Tokens))
	var bq, biqk, bqn *Tensor
	if iqk != nil {
		bq, biqk, bqn = j.alloc(len(q)), j.f32(iqk), j.f32(qNorm)
	} else {
		bq = j.f32(q)
	}
	if err := j.qsaIndex(plan, btok, bq, bkeys, biqk, bqn, j.f32(kNorm), j.f32(b.ropeTable(p.Rot, p.Theta, n)), p); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	if iqk != nil {
		copy(q, f32view(bq, len(q)))
		copy(rawKeys[p.Pos0*p.Dim:n*p.Dim], f32view(bkeys, n*p.Dim)[p.Pos0*p.Dim:])
	}
	sel.T = plan.T
	sel.Dense = append(sel.Dense[:0], plan.Dense...)
	sel.Offsets = append(sel.Offsets[:0], plan.Offsets...)
	sel.Tokens = append(sel.Tokens[:0], i32view(btok, len(plan.Tokens))...)
	return nil
}

// QSAPlan is the layout of the indexer's selection for p (host bookkeeping that depends only on
// the positions): T, Dense and Offsets filled, Tokens sized (len = total selected tokens) but
// not filled; QSAIndex writes the tokens into a device tensor of that length.
func QSAPlan(p kernels.IndexerParams) *kernels.Selection {
	sel := &kernels.Selection{}
	kernels.QSALayout(sel, p)
	return sel
}

// QSAIndex encodes the QSA indexer (Backend.QSAIndex on device tensors): iq [T, NHeads, Dim]
// and the raw keys appended at rows Pos0.. of keys [>= Pos0+T, Dim] from iqk, and the selected
// tokens of plan (QSAPlan(p)) into tok [len(plan.Tokens)] int32. qNorm, kNorm [Dim] are model
// weights. Errors wrap kernels.ErrShape or kernels.ErrArg.
func (j *Pass) QSAIndex(plan *kernels.Selection, tok, iq, keys, iqk *Tensor, qNorm, kNorm []float32, p kernels.IndexerParams) error {
	const op = "qsa_index"
	if plan == nil || p.T <= 0 || p.NHeads <= 0 || p.Dim <= 0 || p.Ratio <= 0 || p.Budget < p.Ratio ||
		len(qNorm) != p.Dim || len(kNorm) != p.Dim {
		return j.fail(fmt.Errorf("%s: %w: T=%d NHeads=%d Dim=%d Ratio=%d Budget=%d", op, kernels.ErrArg, p.T, p.NHeads, p.Dim, p.Ratio, p.Budget))
	}
	if err := ropeArgs(op, p.Dim, p.Rot, p.Pos0, p.T, p.Theta); err != nil {
		return j.fail(err)
	}
	if err := checkEps(op, p.Eps); err != nil {
		return j.fail(err)
	}
	if tok.Len() < len(plan.Tokens) || iq.Len() < p.T*p.NHeads*p.Dim || keys.Len() < (p.Pos0+p.T)*p.Dim || iqk.Len() < p.T*(p.NHeads+1)*p.Dim {
		return j.fail(fmt.Errorf("%s: %w: tensors too small for T=%d pos0=%d", op, kernels.ErrShape, p.T, p.Pos0))
	}
	if err := guard32(op, (p.Pos0+p.T)*p.Dim, p.T*(p.NHeads+1)*p.Dim, p.T*((p.Pos0+p.T)/p.Ratio+1), (p.Pos0+p.T)*p.T); err != nil {
		return j.fail(err)
	}
	return j.qsaIndex(plan, tok, iq, keys, iqk, j.vec(qNorm), j.vec(kNorm), j.rope(p.Rot, p.Theta, p.Pos0+p.T), p)
}

// qsaIndex encodes the indexer; with biqk == nil bq already holds prepared queries.
func (j *Pass) qsaIndex(plan *kernels.Selection, btok, bq, bkeys, biqk, bqn, bkn, brope *Tensor, p kernels.IndexerParams) error {
	b := j.b
	var pipes [4]mtlPipeline
	for i, fn := range []string{"qsa_index_prep", "qsa_block_keys", "qsa_scores", "qsa_select"} {
		pp, err := b.pipeline("qsa_prompt.metal", fn, nil)
		if err != nil {
			return j.fail(err)
		}
		pipes[i] = pp
	}
	total := len(plan.Tokens)
	nbmax := 0
	for t := 0; t < p.T; t++ {
		if !plan.Dense[t] {
			nbmax = (p.Pos0 + t + 1) / p.Ratio
		}
	}
	keep := p.Budget / p.Ratio
	prm := params(p.T, p.Pos0, p.Pos0, p.NHeads, p.Dim, p.Ratio, p.Rot, keep, nbmax, p.Eps, float32(1/math.Sqrt(float64(p.Dim))))
	nt := elemThreads(p.Dim)
	if biqk != nil {
		j.dispatch(pipes[0], fmt.Sprintf("qsa_index_prep_f32_dim%d_rot%d_tg%d", p.Dim, p.Rot, nt), [3]int{p.NHeads + 1, p.T, 1}, [3]int{nt, 1, 1}, 0,
			bq, bkeys, biqk, bqn, brope, prm)
	}
	if total > 0 {
		// Every layer of a pass has the same plan, so the host-written offsets may share one tensor.
		boff := j.tmp("qsa offsets", p.T+1)
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
