package kernels

import (
	"fmt"

	"github.com/stratakernels/strata/internal/blas"
	"github.com/stratakernels/strata/op"
)

// grRead is the GatedResidual read (gr_norm_h4 followed by the mixing GEMMs): from the raw
// streams H [T, S*D] it computes Hn = grouped RMSNorm1p(H; Norm),
// A = sigmoid(Up silu((Down Hn) / S)) [T, S, D], the block input x[t] = mean_s(A_s * Hn_s) [T, D]
// and, when Inj != nil, the write gates beta = 2 sigmoid((Inj Hn) / S) [T, S]. beta is not
// touched (and may be nil) for the final mixer (Inj == nil). H is not modified.
// Errors wrap op.ErrShape, op.ErrInvalidArgument or op.ErrDType.
func grRead(x, beta, H []float32, T int, g *op.GRWeights, eps float32) error {
	return execGRRead(op.GRRead{X: op.HostF32(x), Beta: hostOpt(beta), H: op.HostF32(H), T: T, G: g, Eps: eps})
}

// hostOpt wraps an optional slice: nil stays an absent tensor.
func hostOpt(x []float32) op.Tensor {
	if x == nil {
		return nil
	}
	return op.HostF32(x)
}

func execGRRead(a op.GRRead) error {
	if err := a.Check(); err != nil {
		return err
	}
	var beta []float32
	if op.Present(a.Beta) {
		beta = a.Beta.F32()
	}
	g, T := a.G, a.T
	Hn := a.H.F32()
	if !a.Normed {
		Hn = make([]float32, a.H.Len())
		if err := rmsNorm1pGrouped(Hn, a.H.F32(), T, g.S, g.D, g.Norm, a.Eps); err != nil {
			return err
		}
	}
	return grReadNormed(a.X.F32(), beta, Hn, T, g)
}

func grReadNormed(x, beta, Hn []float32, T int, g *op.GRWeights) error {
	S, D, R := g.S, g.D, g.R
	if T == 0 {
		return nil
	}
	z := make([]float32, T*R)
	if err := grMatMul(z, Hn, T, g.Down); err != nil {
		return err
	}
	fS := float32(S)
	parallelFor(len(z), 4096, func(lo, hi int) { siluRow(z[lo:hi], z[lo:hi], fS) })
	a := make([]float32, T*S*D)
	if err := grMatMul(a, z, T, g.Up); err != nil {
		return err
	}
	parallelFor(T, max(1, 2048/(S*D)), func(lo, hi int) {
		scratch := make([]float32, 2*S*8)
		for t := lo; t < hi; t++ {
			grMeanSigmoidRow(x[t*D:(t+1)*D], a[t*S*D:(t+1)*S*D], Hn[t*S*D:(t+1)*S*D], S, scratch)
		}
	})
	if g.Inj == nil {
		return nil
	}
	if err := grMatMul(beta, Hn, T, g.Inj); err != nil {
		return err
	}
	sigmoidRow(beta, beta, fS)
	for i, v := range beta {
		beta[i] = 2 * v
	}
	return nil
}

// grMatMul is MatMul for the GatedResidual read's thin products (Down [R, S*D], Up [S*D, R],
// Inj [S, S*D]): rowMatMul in tiles of at most grRowBlock token rows (rowTile), so that a block of Hn
// (256 x S*D float32, 10 MiB at S*D = 10240) stays in the last-level cache while the column
// blocks of the thin weights read it, where whole-T column blocks would read all of Hn once per
// column block of 32 weight rows. With a native BLAS (whose row bits depend on the rows beside
// them) an f32 weight runs matMul. Errors wrap op.ErrShape, op.ErrInvalidArgument or op.ErrDType
// (MatMul's).
func grMatMul(y, x []float32, T int, w *op.Matrix) error {
	if err := (op.MatMul{Y: op.HostF32(y), X: op.HostF32(x), T: T, W: w}).Check(); err != nil {
		return err
	}
	if T == 0 || computeOf(w) == nil && blas.Native() {
		return matMul(y, x, T, w)
	}
	return rowMatMul(y, x, T, w, rowTile(T, w, grRowBlock))
}

// grRowBlock is the most token rows of one tile of the GatedResidual's products (grMatMul).
const grRowBlock = 256

// grWriteRow adds beta[s] * u to stream s of one token's H (float32, H + beta*u per element).
func grWriteRow(H, beta, u []float32) {
	D := len(u)
	for s, b := range beta {
		h := H[s*D : (s+1)*D]
		for d, v := range u {
			h[d] += b * v
		}
	}
}

// grWrite is the GatedResidual write: H[t, s, :] += beta[t, s] * u[t, :] for H [T, S*D],
// beta [T, S], u [T, D] (the raw streams plus the gated block output, as
// Qwen4ExpTextDecoderLayer adds the injection). Parallel over tokens. Errors wrap op.ErrShape.
func grWrite(H, beta, u []float32, T, S, D int) error {
	return execGRWrite(op.GRWrite{H: op.HostF32(H), Beta: op.HostF32(beta), U: op.HostF32(u), T: T, S: S, D: D})
}

func execGRWrite(a op.GRWrite) error {
	if err := a.Check(); err != nil {
		return err
	}
	H, beta, u, T, S, D := a.H.F32(), a.Beta.F32(), a.U.F32(), a.T, a.S, a.D
	if op.Present(a.Hn) {
		Hn, norm, eps := a.Hn.F32(), a.Norm, a.Eps
		parallelFor(T, max(1, 2048/(S*D)), func(lo, hi int) {
			for t := lo; t < hi; t++ {
				ht := H[t*S*D : (t+1)*S*D]
				grWriteRow(ht, beta[t*S:(t+1)*S], u[t*D:(t+1)*D])
				grNormRow(Hn[t*S*D:(t+1)*S*D], ht, norm, D, eps)
			}
		})
		return nil
	}
	parallelFor(T, max(1, 2048/(S*D)), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			grWriteRow(H[t*S*D:(t+1)*S*D], beta[t*S:(t+1)*S], u[t*D:(t+1)*D])
		}
	})
	return nil
}

// grWriteNormH is GRWrite followed by the next read's gr_norm_h4 in the same pass:
// Hn = grouped RMSNorm1p(H after the write; norm [S*D]). Bitwise equal to GRWrite then
// RMSNorm1pGrouped. Errors wrap op.ErrShape or op.ErrInvalidArgument.
func grWriteNormH(H, Hn, beta, u []float32, T, S, D int, norm []float32, eps float32) error {
	return execGRWrite(op.GRWrite{H: op.HostF32(H), Hn: op.HostF32(Hn), Beta: op.HostF32(beta), U: op.HostF32(u),
		T: T, S: S, D: D, Norm: norm, Eps: eps})
}

// grNormRow normalises the S streams of one token (the row form of RMSNorm1pGrouped).
func grNormRow(dst, src, norm []float32, D int, eps float32) {
	for s := 0; s < len(src)/D; s++ {
		rmsScale1p(dst[s*D:(s+1)*D], src[s*D:(s+1)*D], norm[s*D:(s+1)*D], eps)
	}
}

// grApplyMoEC is gr_apply_moec: the MoE combine fused into the GatedResidual write. Per token,
// u = sum over slots j of w[t,j] * ye[rk[t,j]] (MoECombine's order) + shared[t] (the shared
// expert output, already gated; nil for none), then H[t, s, :] += beta[t, s] * u.
// H [T, S*D], beta [T, S], ye [rows, D], rk and w [T, K], shared [T, D] or nil.
// Bitwise equal to MoECombine, an elementwise add of shared, then GRWrite.
// Errors wrap op.ErrShape, or op.ErrInvalidArgument for rk outside [-1, rows).
func grApplyMoEC(H, beta, ye []float32, rows int, rk []int32, w, shared []float32, T, S, K, D int) error {
	a := op.GRApplyMoEC{H: op.HostF32(H), Beta: op.HostF32(beta), YE: op.HostF32(ye), RK: op.HostI32(rk),
		W: op.HostF32(w), Shared: hostOpt(shared), T: T, S: S, K: K, D: D}
	if err := a.Check(); err != nil {
		return err
	}
	if rows < 0 || len(ye) != rows*D {
		return fmt.Errorf("GRApplyMoEC: %w: rows=%d D=%d len(ye)=%d", op.ErrShape, rows, D, len(ye))
	}
	return execGRApplyMoEC(a)
}

// grNormHMoEC is gr_norm_h_moec: GRApplyMoEC plus the next read's grouped norm in the same
// pass, Hn [T, S*D] = grouped RMSNorm1p(H after the write; norm [S*D], eps). Bitwise equal to
// GRApplyMoEC then RMSNorm1pGrouped. Errors wrap op.ErrShape or op.ErrInvalidArgument.
func grNormHMoEC(H, Hn, beta, ye []float32, rows int, rk []int32, w, shared []float32, T, S, K, D int,
	norm []float32, eps float32) error {
	a := op.GRApplyMoEC{H: op.HostF32(H), Hn: op.HostF32(Hn), Beta: op.HostF32(beta), YE: op.HostF32(ye),
		RK: op.HostI32(rk), W: op.HostF32(w), Shared: hostOpt(shared), T: T, S: S, K: K, D: D, Norm: norm, Eps: eps}
	if err := a.Check(); err != nil {
		return err
	}
	if rows < 0 || len(ye) != rows*D {
		return fmt.Errorf("GRNormHMoEC: %w: rows=%d D=%d len(ye)=%d", op.ErrShape, rows, D, len(ye))
	}
	return execGRApplyMoEC(a)
}

func execGRApplyMoEC(a op.GRApplyMoEC) error {
	if err := a.Check(); err != nil {
		return err
	}
	if err := a.CheckSlots(a.RK.I32()); err != nil {
		return err
	}
	H, beta, ye, rk, w := a.H.F32(), a.Beta.F32(), a.YE.F32(), a.RK.I32(), a.W.F32()
	T, S, K, D, norm, eps := a.T, a.S, a.K, a.D, a.Norm, a.Eps
	var Hn, shared []float32
	if op.Present(a.Hn) {
		Hn = a.Hn.F32()
	}
	if op.Present(a.Shared) {
		shared = a.Shared.F32()
	}
	parallelFor(T, max(1, 2048/(S*D)), func(lo, hi int) {
		u := make([]float32, D)
		for t := lo; t < hi; t++ {
			moeCombineRow(u, ye, rk[t*K:(t+1)*K], w[t*K:(t+1)*K])
			if shared != nil {
				for d, v := range shared[t*D : (t+1)*D] {
					u[d] += v
				}
			}
			ht := H[t*S*D : (t+1)*S*D]
			grWriteRow(ht, beta[t*S:(t+1)*S], u)
			if Hn != nil {
				grNormRow(Hn[t*S*D:(t+1)*S*D], ht, norm, D, eps)
			}
		}
	})
	return nil
}
