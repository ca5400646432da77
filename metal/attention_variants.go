package metal

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// Variants of op "attention" (attention.metal), chosen with Backend.Prefer("attention", kernel).
// Both compute op.Attention as qsa_flash does, over the same tiles (the HPG query heads of
// one KV head x tq tokens, tq = 16 / HPG, one token per tile when a selection is given), but not
// with qsa_flash's bits:
//   - attnMMKernel multiplies on 8x8 simdgroup matrices (scores Q K^T and P V, float
//     accumulation), meant for short chunks (T <= 16 new tokens): agreement with the CPU op as
//     qsa_flash, below 5e-6 relative to max |o| (1.5e-6 on the golden);
//   - attnFlashPHKernel is qsa_flash with the probabilities rounded to half before the value
//     product: lse keeps qsa_flash's bits, o moves by up to 2^-11 max |v| (measured on the op
//     cases and the golden: at most 2.9e-4 relative to max |o|).
const (
	attnFlashKernel   = "qsa_flash"
	attnMMKernel      = "qsa_attn_mm"
	attnFlashPHKernel = "qsa_flash_ph"
)

// attnMMChunk is QSA_MM_BD of attention.metal: head dims per K/V staging chunk of qsa_attn_mm.
const attnMMChunk = 64

// attentionVariant encodes kernel (attnMMKernel or attnFlashPHKernel) with the arguments of
// Pass.attention. The variant record names the tile: qsa_attn_mm_f32_hpg12_tq1_bm16_bk32_bd64
// (16 padded rows, 32 keys, 64-dim staging chunks), qsa_flash_ph_f32_hpg12_tq1_bk32_bd256.
// Errors wrap op.ErrInvalidArgument for an unknown kernel.
func (j *Pass) attentionVariant(kernel string, bo, blse, bq, bk, bv *Tensor, p op.AttnParams, sel *op.Selection, btok *Tensor) error {
	hpg := p.Hq / p.Hkv
	tq := max(1, qsaRowsMax/hpg)
	sparse := sel != nil
	if sparse {
		tq = 1
	}
	var name string
	var tgMem int
	switch kernel {
	case attnMMKernel:
		name = fmt.Sprintf("qsa_attn_mm_f32_hpg%d_tq%d_bm%d_bk32_bd%d", hpg, tq, qsaRowsMax, attnMMChunk)
		tgMem = 4 * qsaRowsMax * ((p.D + attnMMChunk - 1) / attnMMChunk * attnMMChunk)
	case attnFlashPHKernel:
		name = fmt.Sprintf("qsa_flash_ph_f32_hpg%d_tq%d_bk32_bd256", hpg, tq)
		tgMem = 4 * hpg * min(tq, p.T) * p.D
	default:
		return j.fail(fmt.Errorf("attention: %w: no kernel %q", op.ErrInvalidArgument, kernel))
	}
	pipe, err := j.b.pipeline("attention.metal", kernel, []mtlConst{boolConst(0, sparse)})
	if err != nil {
		return j.fail(err)
	}
	var bd, boff *Tensor
	if sparse {
		bd, boff = j.selectionLayout(sel, p.T)
		name += "_sparse"
	} else {
		bd, boff, btok = bo, bo, bo // not read by the dense form
	}
	j.dispatch(pipe, name, [3]int{(p.T + tq - 1) / tq, p.Hkv, 1}, [3]int{128, 1, 1}, tgMem,
		bo, blse, bq, bk, bv, bd, boff, btok, paramBytes(qsaFlashParams{T: p.T, Hq: p.Hq, Hkv: p.Hkv, D: p.D, Pos0: p.Pos0, Scale: p.Scale, Hpg: hpg, Tq: tq}))
	return j.err
}
