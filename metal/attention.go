package metal

import (
	"fmt"
	"math"

	"github.com/stratakernels/strata/kernels"
)

// Host side of qsa_prompt.metal.

// qsaRowsMax is QSA_RMAX of qsa_prompt.metal: score rows per qsa_flash tile.
const qsaRowsMax = 16

// Attention is qsa_flash (kernels.Attention on the device): causal, optionally QSA-sparse
// grouped-query attention of T query tokens at positions Pos0..Pos0+T-1 over the cache,
// o[t, h] = sum_s softmax_s(Scale * q[t, h] . k[s, h/HPG]) v[s, h/HPG], and lse [T, Hq] the
// natural log-sum-exp of the scaled scores (lse may be nil). q, o [T, Hq, D]; k, v
// [>= Pos0+T, Hkv, D]; sel nil (dense causal) or the indexer's selection (kernels.Selection).
// float32 blocked online softmax: agreement with the CPU op about 1e-6 relative to max |o|.
//
// Tiles hold the HPG query heads of one KV head for tq = 16 / HPG tokens (one token when a
// selection is given: its rows share one key list); the variant name says it, e.g.
// qsa_flash_f32_hpg12_tq1_bk32_bd256. Limits: D <= 256, HPG <= 16.
// Errors wrap kernels.ErrShape or kernels.ErrArg (as the CPU op, plus the limits).
func (b *Backend) Attention(o, lse []float32, q, k, v []float32, p kernels.AttnParams, sel *kernels.Selection) error {
	const op = "attention"
	if err := attnCheck(o, lse, q, k, v, p, sel); err != nil {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	nkv := (p.Pos0 + p.T) * p.Hkv * p.D
	bo, blse := j.alloc(len(o)), j.alloc(p.T*p.Hq)
	var btok *Tensor
	if sel != nil {
		btok = j.i32(sel.Tokens)
	}
	if err := j.attention(bo, blse, j.f32(q), j.f32(k[:nkv]), j.f32(v[:nkv]), p, sel, btok); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(o, f32view(bo, len(o)))
	if lse != nil {
		copy(lse, f32view(blse, len(lse)))
	}
	return nil
}

// Attention encodes qsa_flash (Backend.Attention on device tensors, without lse): o [T, Hq, D]
// from q and the cache kc, vc [>= Pos0+T, Hkv, D]; sel nil (dense causal) or a QSAPlan layout
// whose tokens are in tok (QSAIndex's output). Errors wrap kernels.ErrShape or kernels.ErrArg.
func (j *Pass) Attention(o, q, kc, vc *Tensor, p kernels.AttnParams, sel *kernels.Selection, tok *Tensor) error {
	const op = "attention"
	if p.T <= 0 || p.Hq <= 0 || p.Hkv <= 0 || p.D <= 0 || p.Pos0 < 0 || p.Hq%p.Hkv != 0 || p.Hq/p.Hkv > qsaRowsMax || p.D > 256 ||
		!(p.Scale > 0) || math.IsInf(float64(p.Scale), 1) {
		return j.fail(fmt.Errorf("%s: %w: T=%d Hq=%d Hkv=%d D=%d pos0=%d scale=%v", op, kernels.ErrArg, p.T, p.Hq, p.Hkv, p.D, p.Pos0, p.Scale))
	}
	nkv := (p.Pos0 + p.T) * p.Hkv * p.D
	if err := guard32(op, nkv, p.T*p.Hq*p.D); err != nil {
		return j.fail(err)
	}
	if o.Len() < p.T*p.Hq*p.D || q.Len() < p.T*p.Hq*p.D || kc.Len() < nkv || vc.Len() < nkv ||
		(sel != nil && (sel.T != p.T || len(sel.Dense) != p.T || len(sel.Offsets) != p.T+1 || tok == nil || tok.Len() < len(sel.Tokens))) {
		return j.fail(fmt.Errorf("%s: %w: tensors or selection too small for T=%d pos0=%d", op, kernels.ErrShape, p.T, p.Pos0))
	}
	return j.attention(o, j.tmp("attn lse", p.T*p.Hq), q, kc, vc, p, sel, tok)
}

func (j *Pass) attention(bo, blse, bq, bk, bv *Tensor, p kernels.AttnParams, sel *kernels.Selection, btok *Tensor) error {
	if k := j.b.preferred("attention", attnFlashKernel); k != attnFlashKernel {
		return j.attentionVariant(k, bo, blse, bq, bk, bv, p, sel, btok)
	}
	hpg := p.Hq / p.Hkv
	tq := max(1, qsaRowsMax/hpg)
	sparse := sel != nil
	if sparse {
		tq = 1
	}
	pipe, err := j.b.pipeline("qsa_prompt.metal", "qsa_flash", []mtlConst{boolConst(0, sparse)})
	if err != nil {
		return j.fail(err)
	}
	var bd, boff *Tensor
	if sparse {
		bd, boff = j.selectionLayout(sel, p.T)
	} else {
		bd, boff, btok = bo, bo, bo // not read by the dense variant
	}
	name := fmt.Sprintf("qsa_flash_f32_hpg%d_tq%d_bk32_bd256", hpg, tq)
	if sparse {
		name += "_sparse"
	}
	rows := hpg * min(tq, p.T)
	j.dispatch(pipe, name, [3]int{(p.T + tq - 1) / tq, p.Hkv, 1}, [3]int{128, 1, 1}, 4*rows*p.D,
		bo, blse, bq, bk, bv, bd, boff, btok, params(p.T, p.Hq, p.Hkv, p.D, p.Pos0, p.Scale, hpg, tq))
	return j.err
}

func attnCheck(o, lse []float32, q, k, v []float32, p kernels.AttnParams, sel *kernels.Selection) error {
	const op = "attention"
	if p.T <= 0 || p.Hq <= 0 || p.Hkv <= 0 || p.D <= 0 {
		return fmt.Errorf("%s: T=%d Hq=%d Hkv=%d D=%d must be positive: %w", op, p.T, p.Hq, p.Hkv, p.D, kernels.ErrShape)
	}
	if p.Pos0 < 0 {
		return fmt.Errorf("%s: pos0=%d is negative: %w", op, p.Pos0, kernels.ErrArg)
	}
	if p.Hq%p.Hkv != 0 {
		return fmt.Errorf("%s: Hkv=%d does not divide Hq=%d: %w", op, p.Hkv, p.Hq, kernels.ErrArg)
	}
	if hpg := p.Hq / p.Hkv; hpg > qsaRowsMax || p.D > 256 {
		return fmt.Errorf("%s: HPG=%d D=%d exceed the qsa_flash tile (HPG <= %d, D <= 256): %w", op, hpg, p.D, qsaRowsMax, kernels.ErrArg)
	}
	if !(p.Scale > 0) || math.IsInf(float64(p.Scale), 1) {
		return fmt.Errorf("%s: scale=%v must be finite and positive: %w", op, p.Scale, kernels.ErrArg)
	}
	nq := p.T * p.Hq * p.D
	nkv := (p.Pos0 + p.T) * p.Hkv * p.D
	if err := guard32(op, p.Pos0+p.T, nq, nkv); err != nil {
		return err
	}
	if len(q) != nq || len(o) != nq {
		return fmt.Errorf("%s: len(q)=%d len(o)=%d, want T*Hq*D=%d: %w", op, len(q), len(o), nq, kernels.ErrShape)
	}
	if lse != nil && len(lse) != p.T*p.Hq {
		return fmt.Errorf("%s: len(lse)=%d, want T*Hq=%d: %w", op, len(lse), p.T*p.Hq, kernels.ErrShape)
	}
	if len(k) < nkv || len(v) < nkv || len(k)%(p.Hkv*p.D) != 0 || len(v)%(p.Hkv*p.D) != 0 {
		return fmt.Errorf("%s: len(k)=%d len(v)=%d, want multiples of Hkv*D=%d holding >= %d: %w",
			op, len(k), len(v), p.Hkv*p.D, nkv, kernels.ErrShape)
	}
	if sel != nil {
		return selCheck(sel, p.T, p.Pos0)
	}
	return nil
}

// selCheck validates a selection: the kernel reads keys at the listed positions, so every
// position must lie in 0..pos0+t (ascending, as the CPU op requires).
func selCheck(s *kernels.Selection, T, pos0 int) error {
	const op = "attention"
	if s.T != T || len(s.Dense) != T || len(s.Offsets) != T+1 || s.Offsets[0] != 0 || int(s.Offsets[T]) != len(s.Tokens) {
		return fmt.Errorf("%s: selection T=%d len(Dense)=%d len(Offsets)=%d does not describe %d rows and %d tokens: %w",
			op, s.T, len(s.Dense), len(s.Offsets), T, len(s.Tokens), kernels.ErrArg)
	}
	for t := 0; t < T; t++ {
		a, b := s.Offsets[t], s.Offsets[t+1]
		if b < a || int(b) > len(s.Tokens) || (s.Dense[t] && b != a) || (!s.Dense[t] && b == a) {
			return fmt.Errorf("%s: selection row %d: offsets %d..%d (dense %v): %w", op, t, a, b, s.Dense[t], kernels.ErrArg)
		}
		prev := int64(-1)
		for _, tok := range s.Tokens[a:b] {
			if int64(tok) <= prev || int64(tok) > int64(pos0+t) {
				return fmt.Errorf("%s: selection row %d: token %d after %d not ascending within 0..%d: %w",
					op, t, tok, prev, pos0+t, kernels.ErrArg)
			}
			prev = int64(tok)
		}
	}
	return nil
}

// selectionLayout writes sel's row layout (dense flags as int32, offsets) into the pass's
// scratch tensors for the attention kernels' sparse form. Every layer of a pass has the same
// layout, so one host-written copy serves all. Nil tensors mean the pass has already failed.
func (j *Pass) selectionLayout(sel *kernels.Selection, T int) (bd, boff *Tensor) {
	bd, boff = j.tmp("attn dense", T), j.tmp("attn offsets", T+1)
	if bd != nil && boff != nil {
		dense := bd.I32()
		for t, d := range sel.Dense {
			dense[t] = 0
			if d {
				dense[t] = 1
			}
		}
		copy(boff.I32(), sel.Offsets)
	}
	return bd, boff
}
