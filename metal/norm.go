package metal

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// Host side of the norms and the embedding gather of prompt.metal.

// RMSNorm implements op.Pass with rms_norm: y = x * rsqrt(mean(x^2) + eps) * (1 + w) per row of D,
// float32 throughout (sum of squares per thread in index order, then simd and simdgroup sums in
// fixed order). Agrees with the CPU's float64-sum op to about 1e-6 relative.
func (j *Pass) RMSNorm(a op.RMSNorm) error {
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	y, x := j.dev("y", a.Y), j.dev("x", a.X)
	if j.err != nil {
		return j.err
	}
	return j.rmsRows(y, x, a.Rows, 1, a.D, j.vec(a.W), a.Eps)
}

func (j *Pass) rmsRows(y, x *Tensor, rows, S, D int, w *Tensor, eps float32) error {
	if rows == 0 {
		return j.err
	}
	pipe, err := j.b.pipeline("prompt.metal", "rms_norm", nil)
	if err != nil {
		return j.fail(err)
	}
	nt := fitWidth(pipe, elemThreads(D))
	j.dispatch(pipe, fmt.Sprintf("rms_norm_f32_s%d_tg%d", S, nt), [3]int{rows, 1, 1}, [3]int{nt, 1, 1}, 0,
		y, x, w, paramBytes(normParams{D: D, S: S, Eps: eps}))
	return j.err
}

// grNormH4 encodes the grouped norm hn [T, S, D] = RMSNorm1p(h) with stream weights w [S*D]:
// gr_norm_h4 (one threadgroup per token) or, under Prefer("gr_norm_h4", "rms_norm"), rms_norm
// (one per row); both give the same bits.
func (j *Pass) grNormH4(hn, h *Tensor, T, S, D int, w *Tensor, eps float32) error {
	if j.b.preferred("gr_norm_h4", "gr_norm_h4") == "rms_norm" {
		return j.rmsRows(hn, h, T*S, S, D, w, eps)
	}
	pn, err := j.b.pipeline("prompt.metal", "gr_norm_h4", nil)
	if err != nil {
		return j.fail(err)
	}
	nt := fitWidth(pn, elemThreads(D))
	j.dispatch(pn, fmt.Sprintf("gr_norm_h4_f32_s%d_tg%d", S, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 0,
		hn, h, w, paramBytes(normParams{D: D, S: S, Eps: eps}))
	return j.err
}

// Embed implements op.Pass with embed: H[t, s, :] = table[tok[t], :] widened exactly to float32
// (BF16, F16 or F32 tables; a QAffine table gathers and dequantizes its rows with qgather_affine,
// an FP8Block or QFloat one with qgather_fp, a GGML one with qgather_gg, exactly) and repeated
// into S streams. The token ids are checked on the host when the op is encoded
// (Embed.CheckTokens), so they must be written into the tensor before (they come from the
// caller, never from an earlier op).
func (j *Pass) Embed(a op.Embed) error {
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	t := a.Table
	h, tok := j.dev("H", a.H), j.dev("tokens", a.Tokens)
	if j.err != nil || a.T == 0 {
		return j.err
	}
	if err := a.CheckTokens(tok.I32()); err != nil {
		return j.fail(err)
	}
	if t.DType == op.QAffine {
		return j.qgather(h, tok, a.T, a.S, t, j.qweight(t))
	}
	if isFloatFormat(t) {
		return j.fpgather(h, tok, a.T, a.S, t, j.fpweight(t))
	}
	if t.DType == op.GGML {
		return j.gggather(h, tok, a.T, a.S, t, j.ggweight(t))
	}
	pipe, err := j.b.pipeline("prompt.metal", "embed", nil)
	if err != nil {
		return j.fail(err)
	}
	D := t.K
	nt := fitWidth(pipe, elemThreads(D))
	dtype := map[op.DType]int{op.F32: 0, op.BF16: 1, op.F16: 2}[t.DType]
	var t16, t32 arg = j.tmp("embed dummy16", 1), j.tmp("embed dummy32", 1)
	if t.DType == op.F32 {
		t32 = j.weight(t)
	} else {
		t16 = j.weight(t)
	}
	j.dispatch(pipe, fmt.Sprintf("embed_%s_s%d", t.DType, a.S), [3]int{(D + nt - 1) / nt, a.T, 1}, [3]int{nt, 1, 1}, 0,
		h, t16, t32, tok, paramBytes(embedParams{T: a.T, D: D, S: a.S, V: t.N, Dtype: dtype}))
	return j.err
}
