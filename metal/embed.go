package metal

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// Host side of embed.metal (embed); quantized tables gather with qgather_affine (quant.go),
// qgather_fp (fpquant.go) and qgather_gg (ggml.go).

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
	pipe, err := j.b.pipeline("embed.metal", "embed", nil)
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
