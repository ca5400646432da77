package metal

import (
	"fmt"

	"github.com/stratakernels/strata/kernels"
)

// Host side of the GatedResidual (hyper-connection) read and write of qwen4_exp: compositions of
// gr_norm_h4, gemm_w16/gemm_w32, ew_act, gr_stream_mean and gr_apply_moec / gr_norm_h_moec, each
// op in one command buffer. Math: MODELS.md "GatedResidual"; CPU ops kernels.GRRead and friends.

func grCheck(op string, g *kernels.GRWeights) error {
	if g == nil || g.S <= 0 || g.S > 8 || g.D <= 0 || g.R <= 0 || len(g.Norm) != g.S*g.D {
		return fmt.Errorf("%s: %w: GatedResidual weights missing or S outside 1..8", op, kernels.ErrShape)
	}
	for _, m := range []*kernels.Matrix{g.Down, g.Up} {
		if err := gemmWeight(op, m); err != nil {
			return err
		}
	}
	S, D, R := g.S, g.D, g.R
	if g.Down.N != R || g.Down.K != S*D || g.Up.N != S*D || g.Up.K != R {
		return fmt.Errorf("%s: %w: down [%d, %d] up [%d, %d], want [%d, %d] and [%d, %d]",
			op, kernels.ErrShape, g.Down.N, g.Down.K, g.Up.N, g.Up.K, R, S*D, S*D, R)
	}
	if g.Inj != nil {
		if err := gemmWeight(op, g.Inj); err != nil {
			return err
		}
		if g.Inj.N != S || g.Inj.K != S*D {
			return fmt.Errorf("%s: %w: inject [%d, %d], want [%d, %d]", op, kernels.ErrShape, g.Inj.N, g.Inj.K, S, S*D)
		}
	}
	return nil
}

// GRRead is the GatedResidual read on the device (kernels.GRRead: same arguments): Hn =
// grouped RMSNorm1p(H) (gr_norm_h4), z = silu((Hn W_down^T) / S), A = sigmoid(z W_up^T),
// x [T, D] = mean_s(A_s * Hn_s) (gr_stream_mean) and, when g.Inj != nil, beta [T, S] =
// 2 sigmoid((Hn W_inj^T) / S); beta is not touched (may be nil) without Inj. H [T, S*D].
// Agreement with the CPU op: about 1e-6 relative (float32 norms and activations).
// Errors wrap kernels.ErrShape, kernels.ErrArg or kernels.ErrDType.
func (b *Backend) GRRead(x, beta, H []float32, T int, g *kernels.GRWeights, eps float32) error {
	const op = "GRRead"
	if err := grCheck(op, g); err != nil {
		return err
	}
	if err := checkEps(op, eps); err != nil {
		return err
	}
	return b.grRead(op, x, beta, H, false, T, g, eps)
}

// GRReadNormed is GRRead from already normalised streams Hn [T, S*D] (kernels.GRReadNormed);
// g.Norm is not used. Errors wrap kernels.ErrShape, kernels.ErrArg or kernels.ErrDType.
func (b *Backend) GRReadNormed(x, beta, Hn []float32, T int, g *kernels.GRWeights) error {
	const op = "GRReadNormed"
	if err := grCheck(op, g); err != nil {
		return err
	}
	return b.grRead(op, x, beta, Hn, true, T, g, 0)
}

func (b *Backend) grRead(op string, x, beta, H []float32, normed bool, T int, g *kernels.GRWeights, eps float32) error {
	S, D := g.S, g.D
	if T < 0 || len(H) != T*S*D || len(x) != T*D || (g.Inj != nil && len(beta) != T*S) {
		return fmt.Errorf("%s: %w: T=%d S=%d D=%d len(H)=%d len(x)=%d len(beta)=%d (inject %v)",
			op, kernels.ErrShape, T, S, D, len(H), len(x), len(beta), g.Inj != nil)
	}
	if err := guard32(op, T*S*D); err != nil || T == 0 {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	var bb *Tensor
	if g.Inj != nil {
		bb = j.alloc(T * S)
	}
	bx := j.alloc(T * D)
	if err := j.grRead(bx, bb, j.f32(H), normed, T, g, eps); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(x, f32view(bx, len(x)))
	if bb != nil {
		copy(beta, f32view(bb, T*S))
	}
	return nil
}

// GRRead encodes the GatedResidual read (Backend.GRRead / GRReadNormed on device tensors):
// x [T, D] and, with g.Inj, beta [T, S] from H [T, S*D] (normed: H already holds the grouped
// norm Hn). beta may be nil without Inj. Errors wrap kernels.ErrShape, kernels.ErrArg or
// kernels.ErrDType.
func (j *Pass) GRRead(x, beta, H *Tensor, normed bool, T int, g *kernels.GRWeights, eps float32) error {
	const op = "GRRead"
	if err := grCheck(op, g); err != nil {
		return j.fail(err)
	}
	if err := checkEps(op, eps); err != nil {
		return j.fail(err)
	}
	if T < 0 || H.Len() < T*g.S*g.D || x.Len() < T*g.D || (g.Inj != nil && (beta == nil || beta.Len() < T*g.S)) {
		return j.fail(fmt.Errorf("%s: %w: tensors too small for T=%d S=%d D=%d", op, kernels.ErrShape, T, g.S, g.D))
	}
	if T == 0 {
		return j.err
	}
	return j.grRead(x, beta, H, normed, T, g, eps)
}

func (j *Pass) grRead(bx, bb, H *Tensor, normed bool, T int, g *kernels.GRWeights, eps float32) error {
	b := j.b
	S, D, R := g.S, g.D, g.R
	pmean, err := b.pipeline("prompt.metal", "gr_stream_mean", nil)
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
	j.dispatch(pmean, fmt.Sprintf("gr_stream_mean_f32_s%d_tg%d", S, nt), [3]int{(D + nt - 1) / nt, T, 1}, [3]int{nt, 1, 1}, 0,
		bx, bhn, ba, params(D, S))
	if g.Inj != nil {
		b.encodeMatMul(j, bb, bhn, T, g.Inj)
		b.encodeAct(j, bb, bb, T*S, float32(S), 2, actSigmoid)
	}
	return j.err
}

// GRWrite is the GatedResidual write on the device (kernels.GRWrite): H[t, s, :] +=
// beta[t, s] * u[t, :] as fma in float32 (gr_apply_moec with no routed slots and u as its
// added term). H [T, S*D], beta [T, S], u [T, D]; S <= 8. Errors wrap kernels.ErrShape.
func (b *Backend) GRWrite(H, beta, u []float32, T, S, D int) error {
	if T < 0 || S <= 0 || D <= 0 || len(u) != T*D {
		return fmt.Errorf("GRWrite: %w: T=%d S=%d D=%d len(u)=%d", kernels.ErrShape, T, S, D, len(u))
	}
	return b.grApplyMoEC("GRWrite", H, nil, beta, nil, 0, nil, nil, u, T, S, 0, D, nil, 0)
}

// GRWriteNormH is GRWrite followed by the next read's grouped norm in the same pass
// (kernels.GRWriteNormH; gr_norm_h_moec with no routed slots): Hn [T, S*D] = grouped
// RMSNorm1p(H after the write; norm [S*D]). Errors wrap kernels.ErrShape or kernels.ErrArg.
func (b *Backend) GRWriteNormH(H, Hn, beta, u []float32, T, S, D int, norm []float32, eps float32) error {
	const op = "GRWriteNormH"
	if T < 0 || S <= 0 || D <= 0 || len(u) != T*D || len(Hn) != T*S*D || len(norm) != S*D {
		return fmt.Errorf("%s: %w: T=%d S=%d D=%d len(u)=%d len(Hn)=%d len(norm)=%d", op, kernels.ErrShape, T, S, D, len(u), len(Hn), len(norm))
	}
	if err := checkEps(op, eps); err != nil {
		return err
	}
	return b.grApplyMoEC(op, H, Hn, beta, nil, 0, nil, nil, u, T, S, 0, D, norm, eps)
}
