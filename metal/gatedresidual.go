package metal

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// Host side of gatedresidual.metal (gr_stream_mean, gr_norm_h_stream_out): the GatedResidual
// (hyper-connection) read and write of qwen4_exp, compositions of gr_norm_h4 (norm.metal),
// gemm_w16/gemm_w32, ew_act (elementwise.metal), gr_stream_mean / gr_norm_h_stream_out and
// gr_apply_moec / gr_norm_h_moec (moe.metal).
// Math: docs/MODELS.md "GatedResidual" and op.GRRead / op.GRWrite.

// GRRead implements op.Pass: Hn = grouped RMSNorm1p(H) (gr_norm_h4; skipped when Normed),
// z = silu((Hn W_down^T) / S), A = sigmoid(z W_up^T), x [T, D] = mean_s(A_s * Hn_s)
// (gr_stream_mean) and, when G.Inj != nil, beta [T, S] = 2 sigmoid((Hn W_inj^T) / S).
// Agreement with the CPU op: about 1e-6 relative (float32 norms and activations). S <= 8.
func (j *Pass) GRRead(a op.GRRead) error {
	const opName = "GRRead"
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	if a.G.S > 8 {
		return j.unsupported(opName, "S=%d streams (the kernels take 1..8)", a.G.S)
	}
	x, beta, H := j.dev("x", a.X), j.dev("beta", a.Beta), j.dev("H", a.H)
	if j.err != nil || a.T == 0 {
		return j.err
	}
	if err := guard32(opName, a.T*a.G.S*a.G.D); err != nil {
		return j.fail(err)
	}
	return j.grRead(x, beta, H, a.Normed, a.T, a.G, a.Eps)
}

func (j *Pass) grRead(bx, bb, H *Tensor, normed bool, T int, g *op.GRWeights, eps float32) error {
	b := j.b
	S, D, R := g.S, g.D, g.R
	pmean, err := b.pipeline("gatedresidual.metal", "gr_stream_mean", nil)
	if err != nil {
		return j.fail(err)
	}
	nt := elemThreads(D)
	bhn := H
	if !normed {
		bhn = j.tmp("gr hn", T*S*D)
		j.grNormH4(bhn, H, T, S, D, j.vec(g.Norm), eps)
	}
	bz, ba := j.tmp("gr z", T*R), j.tmp("gr a", T*S*D)
	b.encodeMatMul(j, bz, bhn, T, g.Down)
	b.encodeAct(j, bz, bz, T*R, float32(S), 1, actSilu)
	b.encodeMatMul(j, ba, bz, T, g.Up)
	if !normed && b.preferred("gr_stream_mean", "gr_stream_mean") == "gr_norm_h_stream_out" {
		// The read's output from the raw streams, renormalising them in the same pass.
		pso, err := b.pipeline("gatedresidual.metal", "gr_norm_h_stream_out", nil)
		if err != nil {
			return j.fail(err)
		}
		j.dispatch(pso, fmt.Sprintf("gr_norm_h_stream_out_f32_s%d_tg%d", S, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 0,
			bx, H, ba, j.vec(g.Norm), paramBytes(normParams{D: D, S: S, Eps: eps}))
	} else {
		j.dispatch(pmean, fmt.Sprintf("gr_stream_mean_f32_s%d_tg%d", S, nt), [3]int{(D + nt - 1) / nt, T, 1}, [3]int{nt, 1, 1}, 0,
			bx, bhn, ba, paramBytes(streamParams{D: D, S: S}))
	}
	if g.Inj != nil {
		b.encodeMatMul(j, bb, bhn, T, g.Inj)
		b.encodeAct(j, bb, bb, T*S, float32(S), 2, actSigmoid)
	}
	return j.err
}

// GRWrite implements op.Pass: H[t, s, :] += beta[t, s] * u[t, :] as fma in float32 (gr_apply_moec
// with no routed slots and u as its added term); with Hn also the next read's grouped norm
// (gr_norm_h_moec). S <= 8.
func (j *Pass) GRWrite(a op.GRWrite) error {
	const opName = "GRWrite"
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	if a.S > 8 {
		return j.unsupported(opName, "S=%d streams (the kernels take 1..8)", a.S)
	}
	H, Hn, beta, u := j.dev("H", a.H), j.dev("Hn", a.Hn), j.dev("beta", a.Beta), j.dev("u", a.U)
	if j.err != nil {
		return j.err
	}
	if err := guard32(opName, a.T*a.S*a.D); err != nil {
		return j.fail(err)
	}
	var bn *Tensor
	if Hn != nil {
		bn = j.vec(a.Norm)
	}
	return j.grApply(H, Hn, beta, nil, nil, nil, u, a.T, a.S, 0, a.D, bn, a.Eps)
}
