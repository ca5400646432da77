package metal

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// Host side of attention.metal (qsa_flash; its variants in attention_variants.go).

// qsaRowsMax is QSA_RMAX of attention.metal: score rows per qsa_flash tile.
const qsaRowsMax = 16

// Attention implements op.Pass with qsa_flash: causal, optionally QSA-sparse grouped-query
// attention of T query tokens at positions Pos0..Pos0+T-1 over the cache, with lse when asked.
// float32 blocked online softmax: agreement with the CPU op about 1e-6 relative to max |o|.
// Tiles hold the HPG query heads of one KV head for tq = 16 / HPG tokens (one token when a
// selection is given: its rows share one key list); the variant name says it, e.g.
// qsa_flash_f32_hpg12_tq1_bk32_bd256. The selected tokens are not range-checked here (they come
// from QSAIndex on the device, or were checked by the caller: Selection.CheckTokens).
// Limits: D <= 256, HPG <= 16. Other kernels of the op: Prefer("attention", ...); on M5 the
// tensor-op qsa_flash_tensor (attention_tensor.go) once its first-use self-check passed.
func (j *Pass) Attention(a op.Attention) error {
	const opName = "attention"
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	p := a.P
	if hpg := p.Hq / p.Hkv; hpg > qsaRowsMax || p.D > 256 {
		return j.unsupported(opName, "HPG=%d D=%d exceed the qsa_flash tile (HPG <= %d, D <= 256)", hpg, p.D, qsaRowsMax)
	}
	nkv := (p.Pos0 + p.T) * p.Hkv * p.D
	if err := guard32(opName, p.Pos0+p.T, p.T*p.Hq*p.D, nkv); err != nil {
		return j.fail(err)
	}
	o, q, k, v, tok := j.dev("o", a.O), j.dev("q", a.Q), j.dev("k", a.K), j.dev("v", a.V), j.dev("tokens", a.Tok)
	lse := j.dev("lse", a.LSE)
	if j.err != nil {
		return j.err
	}
	if lse == nil {
		lse = j.tmp("attn lse", p.T*p.Hq)
	}
	return j.attention(o, lse, q, k, v, p, a.Sel, tok)
}

func (j *Pass) attention(bo, blse, bq, bk, bv *Tensor, p op.AttnParams, sel *op.Selection, btok *Tensor) error {
	switch k := j.kernel("attention", attnFlashKernel); k {
	case attnFlashKernel:
	case attnTensorKernel, attnTensorPFKernel:
		return j.attentionTensor(k, bo, blse, bq, bk, bv, p, sel, btok)
	default:
		return j.attentionVariant(k, bo, blse, bq, bk, bv, p, sel, btok)
	}
	hpg := p.Hq / p.Hkv
	tq := max(1, qsaRowsMax/hpg)
	sparse := sel != nil
	if sparse {
		tq = 1
	}
	pipe, err := j.b.pipeline("attention.metal", "qsa_flash", []mtlConst{boolConst(0, sparse)})
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
		bo, blse, bq, bk, bv, bd, boff, btok, paramBytes(qsaFlashParams{T: p.T, Hq: p.Hq, Hkv: p.Hkv, D: p.D, Pos0: p.Pos0, Scale: p.Scale, Hpg: hpg, Tq: tq}))
	return j.err
}

// selectionLayout writes sel's row layout (dense flags as int32, offsets) into the pass's
// scratch tensors for the attention kernels' sparse form. Every layer of a pass has the same
// layout, so one host-written copy serves all. Nil tensors mean the pass has already failed.
func (j *Pass) selectionLayout(sel *op.Selection, T int) (bd, boff *Tensor) {
	bd, boff = j.tmpI32("attn dense", T), j.tmpI32("attn offsets", T+1)
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
