package metal

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// Host side of attention_tensor.metal: op "attention" on Metal 4 tensor ops.

// qtKeys and qtDims are QT_BK and QT_BD of attention_tensor.metal: keys per block, head dims per K/V
// staging chunk (rows with a selection).
const (
	qtKeys = 32
	qtDims = 32
)

// attentionTensor encodes kernel (attnTensorKernel: P in half, the default on M5; or
// attnTensorPFKernel: P in float) with the arguments of Pass.attention. Tiles are one token's
// HPG query heads of one KV head (grid (T, Hkv), 128 threads). Threadgroup memory: the S/P
// buffer 4*HPG*32 B, with a selection the K/V staging chunk 4 KiB (dynamic), 192 B static: at
// HPG 12 1,728 B dense and 5,824 B sparse, at any D (4 threadgroups per core by memory needs
// at most 8 KiB). Variant names: qsa_flash_tensor_f32_hpg12_tq1_bk32_bd32 (+ "_sparse"),
// qsa_attn_tensor_f32_... . Agreement: qsa_attn_tensor gives qsa_attn_mm's bits on the emulator
// (the same fma chains in the same order); qsa_flash_tensor differs from it by the half
// rounding of P (o within 2^-11 max |v|, lse the same bits). On a GPU the matrix units order
// the sums themselves: only the tolerances hold.
func (j *Pass) attentionTensor(kernel string, bo, blse, bq, bk, bv *Tensor, p op.AttnParams, sel *op.Selection, btok *Tensor) error {
	hpg := p.Hq / p.Hkv
	sparse := sel != nil
	pipe, err := j.b.pipeline("attention_tensor.metal", kernel, []mtlConst{boolConst(0, sparse)})
	if err != nil {
		return j.fail(err)
	}
	name := fmt.Sprintf("%s_f32_hpg%d_tq1_bk%d_bd%d", kernel, hpg, qtKeys, qtDims)
	tgMem := 4 * hpg * qtKeys
	var bd, boff *Tensor
	if sparse {
		bd, boff = j.selectionLayout(sel, p.T)
		name += "_sparse"
		tgMem += 4 * qtKeys * qtDims
	} else {
		bd, boff, btok = bo, bo, bo // not read by the dense form
	}
	j.dispatch(pipe, name, [3]int{p.T, p.Hkv, 1}, [3]int{128, 1, 1}, tgMem,
		bo, blse, bq, bk, bv, bd, boff, btok, paramBytes(qsaFlashParams{T: p.T, Hq: p.Hq, Hkv: p.Hkv, D: p.D, Pos0: p.Pos0, Scale: p.Scale, Hpg: hpg, Tq: 1}))
	return j.err
}
