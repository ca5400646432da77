package metal

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// Host side of the PLE kernels of prompt.metal (ple_gather, ple_gate, ple_conv, ple_state).

// PLEApply implements op.Pass: the table rows of ids [T, Heads] gathered into emb [T, EmbedDim]
// (ple_gather; qgather_affine for a QAffine table, qgather_fp for an FP8Block or QFloat one), key = emb Key^T and value = emb Value^T (gemm_w16/gemm_w32), the gate and the
// grouped norms per token (ple_gate), H += gv + silu(dilated causal conv of gvn) with the carried
// conv state (ple_conv), and the state advanced (ple_state). The hashed ids come from
// op.PLEHash on the host (integer bookkeeping over the token history, not worth a kernel) and are
// checked on the host when the op is encoded (PLEApply.CheckIDs), so they must be written into
// their tensor before. float32 sums (the CPU op sums dots and the conv in float64): agreement
// about 1e-6 relative. Limits: S <= 8, (ConvK-1)*Dilation <= 32.
func (j *Pass) PLEApply(a op.PLEApply) error {
	const opName = "PLEApply"
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	w := a.W
	C, L := w.S*w.D, (w.ConvK()-1)*w.Dilation
	if w.S > 8 || L > 32 {
		return j.unsupported(opName, "S=%d streams, conv state of %d steps (the kernels take S <= 8, at most 32 steps)", w.S, L)
	}
	rows := 0
	if w.Table != nil {
		rows = w.Table.N
	}
	if err := guard32(opName, a.T*C, a.T*w.EmbedDim, rows*w.HeadDim); err != nil {
		return j.fail(err)
	}
	H, st := j.dev("H", a.H), j.dev("convState", a.ConvState)
	var ids, emb *Tensor
	if op.Present(a.Emb) {
		emb = j.dev("emb", a.Emb)
	} else {
		ids = j.dev("ids", a.IDs)
	}
	if j.err != nil || a.T == 0 {
		return j.err
	}
	if ids != nil {
		if err := a.CheckIDs(ids.I32()); err != nil {
			return j.fail(err)
		}
	}
	return j.pleApply(H, a.T, ids, emb, w, st, a.Eps)
}

// pleApply encodes the PLE layer; emb, when not nil, holds the gathered table rows (else the
// rows of bids are gathered from w.Table).
func (j *Pass) pleApply(bh *Tensor, T int, bids, emb *Tensor, w *op.PLEWeights, bst *Tensor, eps float32) error {
	b := j.b
	S, D, E, Hd := w.S, w.D, w.EmbedDim, w.HeadDim
	heads, C, K := E/Hd, S*D, w.ConvK()
	L := (K - 1) * w.Dilation
	var pipes [4]mtlPipeline
	for i, fn := range []string{"ple_gather", "ple_gate", "ple_conv", "ple_state"} {
		p, err := b.pipeline("prompt.metal", fn, nil)
		if err != nil {
			return j.fail(err)
		}
		pipes[i] = p
	}
	bemb, bkey, bval := emb, j.tmp("ple key", T*C), j.tmp("ple value", T*D)
	switch {
	case emb != nil:
	case w.Table.DType == op.QAffine:
		bemb = j.tmp("ple emb", T*E)
		// emb [T, heads, Hd] is the table rows of ids [T*heads] in order.
		j.qgather(bemb, bids, T*heads, 1, w.Table)
	case isFloatFormat(w.Table):
		bemb = j.tmp("ple emb", T*E)
		j.fpgather(bemb, bids, T*heads, 1, w.Table)
	default:
		bemb = j.tmp("ple emb", T*E)
		dtype := map[op.DType]int{op.F32: 0, op.BF16: 1, op.F16: 2}[w.Table.DType]
		var t16, t32 arg = j.tmp("ple dummy16", 1), j.tmp("ple dummy32", 1)
		if w.Table.DType == op.F32 {
			t32 = j.weight(w.Table)
		} else {
			t16 = j.weight(w.Table)
		}
		ne := elemThreads(E)
		j.dispatch(pipes[0], fmt.Sprintf("ple_gather_%s_h%d_hd%d", w.Table.DType, heads, Hd), [3]int{(E + ne - 1) / ne, T, 1}, [3]int{ne, 1, 1}, 0,
			bemb, t16, t32, bids, paramBytes(pleGatherParams{T: T, Heads: heads, Hd: Hd, Dtype: dtype}))
	}
	b.encodeMatMul(j, bkey, bemb, T, w.Key)
	b.encodeMatMul(j, bval, bemb, T, w.Value)
	bgv, bgvn := j.tmp("ple gv", T*C), j.tmp("ple gvn", T*C)
	nt := elemThreads(D)
	j.dispatch(pipes[1], fmt.Sprintf("ple_gate_f32_s%d_tg%d", S, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 0,
		bgv, bgvn, bkey, bval, bh, j.vec(w.NormKey), j.vec(w.NormQuery), j.vec(w.NormConv), paramBytes(normParams{D: D, S: S, Eps: eps}))
	prm := paramBytes(pleConvParams{T: T, C: C, K: K, Dil: w.Dilation})
	j.dispatch(pipes[2], fmt.Sprintf("ple_conv_f32_k%d_dil%d", K, w.Dilation), [3]int{(C + 255) / 256, T, 1}, [3]int{256, 1, 1}, 0,
		bh, bgv, bgvn, bst, j.vec(w.ConvW), prm)
	if L > 0 {
		j.dispatch(pipes[3], fmt.Sprintf("ple_state_f32_steps%d", L), [3]int{(C + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0,
			bst, bgvn, prm)
	}
	return j.err
}
