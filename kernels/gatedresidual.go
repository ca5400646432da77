package kernels

import "fmt"

// GRWeights is one GatedResidual (hyper-connection) module of qwen4_exp with S streams of D
// and low rank R: Norm [S*D] (hc_norm, grouped RMSNorm1p per stream), Down [R, S*D]
// (input_mix_weight_down), Up [S*D, R] (input_mix_weight_up), Inj [S, S*D]
// (block_inject_weight; nil for the final hyper_connection_mixer, which only reads).
// Source: Qwen4ExpTextGatedResidual in modeling_qwen4_exp.py.
type GRWeights struct {
	S, D, R int
	Norm    []float32
	Down    *Matrix
	Up      *Matrix
	Inj     *Matrix
}

func (g *GRWeights) validate(op string) error {
	if g == nil {
		return fmt.Errorf("%s: %w: nil GatedResidual weights", op, ErrArg)
	}
	S, D, R := g.S, g.D, g.R
	if S <= 0 || D <= 0 || R <= 0 || len(g.Norm) != S*D {
		return fmt.Errorf("%s: %w: S=%d D=%d R=%d len(Norm)=%d", op, ErrShape, S, D, R, len(g.Norm))
	}
	for _, m := range []*Matrix{g.Down, g.Up} {
		if err := m.validate(op); err != nil {
			return err
		}
	}
	if g.Down.N != R || g.Down.K != S*D || g.Up.N != S*D || g.Up.K != R {
		return fmt.Errorf("%s: %w: down [%d, %d] (want [%d, %d]), up [%d, %d] (want [%d, %d])",
			op, ErrShape, g.Down.N, g.Down.K, R, S*D, g.Up.N, g.Up.K, S*D, R)
	}
	if g.Inj != nil {
		if err := g.Inj.validate(op); err != nil {
			return err
		}
		if g.Inj.N != S || g.Inj.K != S*D {
			return fmt.Errorf("%s: %w: inject [%d, %d] (want [%d, %d])", op, ErrShape, g.Inj.N, g.Inj.K, S, S*D)
		}
	}
	return nil
}

// GRRead is the GatedResidual read (gr_norm_h4 followed by the mixing GEMMs): from the raw
// streams H [T, S*D] it computes Hn = grouped RMSNorm1p(H; Norm),
// A = sigmoid(Up silu((Down Hn) / S)) [T, S, D], the block input x[t] = mean_s(A_s * Hn_s) [T, D]
// and, when Inj != nil, the write gates beta = 2 sigmoid((Inj Hn) / S) [T, S]. beta is not
// touched (and may be nil) for the final mixer (Inj == nil). H is not modified.
// Errors wrap ErrShape, ErrArg or ErrDType.
func GRRead(x, beta, H []float32, T int, g *GRWeights, eps float32) error {
	if g != nil {
		if err := checkElems("GRRead", "H", T, g.S, g.D); err != nil {
			return err
		}
	}
	if err := g.validate("GRRead"); err != nil {
		return err
	}
	if T < 0 || len(H) != T*g.S*g.D {
		return fmt.Errorf("GRRead: %w: T=%d len(H)=%d, want %d", ErrShape, T, len(H), T*g.S*g.D)
	}
	Hn := make([]float32, len(H))
	if err := RMSNorm1pGrouped(Hn, H, T, g.S, g.D, g.Norm, eps); err != nil {
		return err
	}
	return GRReadNormed(x, beta, Hn, T, g)
}

// GRReadNormed is GRRead from already normalised streams Hn [T, S*D] (as GRNormHMoEC and
// GRWriteNormH produce them); g.Norm is not used. Errors wrap ErrShape, ErrArg or ErrDType.
func GRReadNormed(x, beta, Hn []float32, T int, g *GRWeights) error {
	if err := g.validate("GRReadNormed"); err != nil {
		return err
	}
	S, D, R := g.S, g.D, g.R
	if T < 0 || len(Hn) != T*S*D || len(x) != T*D || (g.Inj != nil && len(beta) != T*S) {
		return fmt.Errorf("GRReadNormed: %w: T=%d S=%d D=%d len(Hn)=%d len(x)=%d len(beta)=%d (inject %v)",
			ErrShape, T, S, D, len(Hn), len(x), len(beta), g.Inj != nil)
	}
	if T == 0 {
		return nil
	}
	z := make([]float32, T*R)
	if err := MatMul(z, Hn, T, g.Down); err != nil {
		return err
	}
	fS := float32(S)
	parallelFor(len(z), 4096, func(lo, hi int) { siluRow(z[lo:hi], z[lo:hi], fS) })
	a := make([]float32, T*S*D)
	if err := MatMul(a, z, T, g.Up); err != nil {
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
	if err := MatMul(beta, Hn, T, g.Inj); err != nil {
		return err
	}
	sigmoidRow(beta, beta, fS)
	for i, v := range beta {
		beta[i] = 2 * v
	}
	return nil
}

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

func grCheckWrite(op string, H, beta []float32, T, S, D int) error {
	if T < 0 || S <= 0 || D <= 0 || len(H) != T*S*D || len(beta) != T*S {
		return fmt.Errorf("%s: %w: T=%d S=%d D=%d len(H)=%d len(beta)=%d", op, ErrShape, T, S, D, len(H), len(beta))
	}
	return nil
}

// GRWrite is the GatedResidual write: H[t, s, :] += beta[t, s] * u[t, :] for H [T, S*D],
// beta [T, S], u [T, D] (the raw streams plus the gated block output, as
// Qwen4ExpTextDecoderLayer adds the injection). Parallel over tokens. Errors wrap ErrShape.
func GRWrite(H, beta, u []float32, T, S, D int) error {
	if err := grCheckWrite("GRWrite", H, beta, T, S, D); err != nil {
		return err
	}
	if len(u) != T*D {
		return fmt.Errorf("GRWrite: %w: len(u)=%d, want %d", ErrShape, len(u), T*D)
	}
	parallelFor(T, max(1, 2048/(S*D)), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			grWriteRow(H[t*S*D:(t+1)*S*D], beta[t*S:(t+1)*S], u[t*D:(t+1)*D])
		}
	})
	return nil
}

// GRWriteNormH is GRWrite followed by the next read's gr_norm_h4 in the same pass:
// Hn = grouped RMSNorm1p(H after the write; norm [S*D]). Bitwise equal to GRWrite then
// RMSNorm1pGrouped. Errors wrap ErrShape or ErrArg.
func GRWriteNormH(H, Hn, beta, u []float32, T, S, D int, norm []float32, eps float32) error {
	if err := grCheckWrite("GRWriteNormH", H, beta, T, S, D); err != nil {
		return err
	}
	if len(u) != T*D || len(Hn) != T*S*D || len(norm) != S*D || !(eps >= 0) {
		return fmt.Errorf("GRWriteNormH: %w: len(u)=%d len(Hn)=%d len(norm)=%d eps=%g", ErrShape, len(u), len(Hn), len(norm), eps)
	}
	parallelFor(T, max(1, 2048/(S*D)), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			ht := H[t*S*D : (t+1)*S*D]
			grWriteRow(ht, beta[t*S:(t+1)*S], u[t*D:(t+1)*D])
			grNormRow(Hn[t*S*D:(t+1)*S*D], ht, norm, D, eps)
		}
	})
	return nil
}

// grNormRow normalises the S streams of one token (the row form of RMSNorm1pGrouped).
func grNormRow(dst, src, norm []float32, D int, eps float32) {
	for s := 0; s < len(src)/D; s++ {
		rmsScale1p(dst[s*D:(s+1)*D], src[s*D:(s+1)*D], norm[s*D:(s+1)*D], eps)
	}
}

// GRApplyMoEC is gr_apply_moec: the MoE combine fused into the GatedResidual write. Per token,
// u = sum over slots j of w[t,j] * ye[rk[t,j]] (MoECombine's order) + shared[t] (the shared
// expert output, already gated; nil for none), then H[t, s, :] += beta[t, s] * u.
// H [T, S*D], beta [T, S], ye [rows, D], rk and w [T, K], shared [T, D] or nil.
// Bitwise equal to MoECombine, an elementwise add of shared, then GRWrite.
// Errors wrap ErrShape, or ErrArg for rk outside [-1, rows).
func GRApplyMoEC(H, beta, ye []float32, rows int, rk []int32, w, shared []float32, T, S, K, D int) error {
	if err := firstErr(checkElems("GRApplyMoEC", "H", T, S, D), checkElems("GRApplyMoEC", "ye", rows, D)); err != nil {
		return err
	}
	return grApplyMoEC("GRApplyMoEC", H, nil, beta, ye, rows, rk, w, shared, T, S, K, D, nil, 0)
}

// GRNormHMoEC is gr_norm_h_moec: GRApplyMoEC plus the next read's grouped norm in the same
// pass, Hn [T, S*D] = grouped RMSNorm1p(H after the write; norm [S*D], eps). Bitwise equal to
// GRApplyMoEC then RMSNorm1pGrouped. Errors wrap ErrShape or ErrArg.
func GRNormHMoEC(H, Hn, beta, ye []float32, rows int, rk []int32, w, shared []float32, T, S, K, D int,
	norm []float32, eps float32) error {
	if len(Hn) != T*S*D || len(norm) != S*D || !(eps >= 0) {
		return fmt.Errorf("GRNormHMoEC: %w: len(Hn)=%d len(norm)=%d eps=%g (T=%d S=%d D=%d)",
			ErrShape, len(Hn), len(norm), eps, T, S, D)
	}
	return grApplyMoEC("GRNormHMoEC", H, Hn, beta, ye, rows, rk, w, shared, T, S, K, D, norm, eps)
}

func grApplyMoEC(op string, H, Hn, beta, ye []float32, rows int, rk []int32, w, shared []float32,
	T, S, K, D int, norm []float32, eps float32) error {
	if err := grCheckWrite(op, H, beta, T, S, D); err != nil {
		return err
	}
	if err := moeCheckCombine(op, ye, rows, rk, w, T, K, D); err != nil {
		return err
	}
	if shared != nil && len(shared) != T*D {
		return fmt.Errorf("%s: %w: len(shared)=%d, want %d", op, ErrShape, len(shared), T*D)
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
