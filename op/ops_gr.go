package op

import "fmt"

// GRRead is the GatedResidual read of qwen4_exp (gr_norm_h4 and the mixing GEMMs): from the raw
// streams H [T, S*D], Hn = grouped RMSNorm1p(H; G.Norm), A = sigmoid(G.Up silu((G.Down Hn) / S))
// [T, S, D], the block input x[t] = mean_s(A_s * Hn_s) [T, D] and, when G.Inj != nil, the write
// gates beta = 2 sigmoid((G.Inj Hn) / S) [T, S]. With Normed, H already holds Hn (as GRWrite
// and GRApplyMoEC produce it) and G.Norm is not used. Beta is nil for the final read-only mixer
// (G.Inj == nil). H is not modified. Source: Qwen4ExpTextHyperConnection.
type GRRead struct {
	X, Beta, H Tensor // F32 [T, D], F32 [T, S] (nil without Inj), F32 [T, S*D]
	Normed     bool
	T          int
	G          *GRWeights
	Eps        float32
}

// Check validates the shapes. Errors wrap ErrShape, ErrDType or ErrInvalidArgument.
func (a GRRead) Check() error {
	const op = "GRRead"
	if err := a.G.Validate(op); err != nil {
		return err
	}
	S, D := a.G.S, a.G.D
	if a.T < 0 {
		return fmt.Errorf("%s: %w: T=%d", op, ErrShape, a.T)
	}
	if err := checkElems(op, "H", a.T, S, D); err != nil {
		return err
	}
	if err := firstErr(need(op, "H", a.H, F32, a.T*S*D), need(op, "x", a.X, F32, a.T*D), checkEps(op, a.Eps)); err != nil {
		return err
	}
	if a.G.Inj != nil {
		return need(op, "beta", a.Beta, F32, a.T*S)
	}
	if Present(a.Beta) {
		return fmt.Errorf("%s: %w: beta given for a read without block_inject_weight", op, ErrInvalidArgument)
	}
	return nil
}

// GRWrite is the GatedResidual write H[t, s, :] += Beta[t, s] * U[t, :]; with Hn given it also
// writes the next read's grouped norm Hn = grouped RMSNorm1p(H; Norm) in the same pass
// (gr_norm_h4 fused into the write), bitwise equal to the write followed by the norm.
type GRWrite struct {
	H, Hn, Beta, U Tensor // F32 [T, S*D], F32 [T, S*D] or nil, F32 [T, S], F32 [T, D]
	T, S, D        int
	Norm           []float32 // [S*D] with Hn
	Eps            float32
}

// Check validates the shapes. Errors wrap ErrShape or ErrInvalidArgument.
func (a GRWrite) Check() error {
	const op = "GRWrite"
	if err := checkWrite(op, a.H, a.Beta, a.T, a.S, a.D); err != nil {
		return err
	}
	if err := need(op, "u", a.U, F32, a.T*a.D); err != nil {
		return err
	}
	return checkNormH(op, a.Hn, a.Norm, a.Eps, a.T, a.S, a.D)
}

func checkWrite(op string, H, beta Tensor, T, S, D int) error {
	if T < 0 || S <= 0 || D <= 0 {
		return fmt.Errorf("%s: %w: T=%d S=%d D=%d", op, ErrShape, T, S, D)
	}
	if err := checkElems(op, "H", T, S, D); err != nil {
		return err
	}
	return firstErr(need(op, "H", H, F32, T*S*D), need(op, "beta", beta, F32, T*S))
}

func checkNormH(op string, Hn Tensor, norm []float32, eps float32, T, S, D int) error {
	if !Present(Hn) {
		return nil
	}
	return firstErr(need(op, "Hn", Hn, F32, T*S*D), needVec(op, "norm", norm, S*D), checkEps(op, eps))
}

// GRApplyMoEC is gr_apply_moec: the MoE combine fused into the GatedResidual write,
// u[t] = sum over slots j (in slot order) of W[t, j] * YE[RK[t, j]] (+ Shared[t]), then
// H[t, s, :] += Beta[t, s] * u[t]; with Hn given, gr_norm_h_moec: also the next read's grouped
// norm into Hn. Bitwise equal to MoECombine (plus Shared) followed by GRWrite.
type GRApplyMoEC struct {
	H, Hn, Beta Tensor // F32 [T, S*D], F32 [T, S*D] or nil, F32 [T, S]
	YE, RK, W   Tensor // F32 [rows, D] expert rows, I32 [T, K] slot rows (-1 = empty), F32 [T, K]
	Shared      Tensor // F32 [T, D] or nil
	T, S, K, D  int
	Norm        []float32 // [S*D] with Hn
	Eps         float32
}

// Check validates the shapes (not the slot rows: CheckSlots). Errors wrap ErrShape or
// ErrInvalidArgument.
func (a GRApplyMoEC) Check() error {
	const op = "GRApplyMoEC"
	if err := checkWrite(op, a.H, a.Beta, a.T, a.S, a.D); err != nil {
		return err
	}
	if err := checkCombine(op, a.YE, a.RK, a.W, a.T, a.K, a.D); err != nil {
		return err
	}
	if Present(a.Shared) {
		if err := need(op, "shared", a.Shared, F32, a.T*a.D); err != nil {
			return err
		}
	}
	return checkNormH(op, a.Hn, a.Norm, a.Eps, a.T, a.S, a.D)
}

// CheckSlots validates host slot rows against the expert rows. Errors wrap ErrInvalidArgument.
func (a GRApplyMoEC) CheckSlots(rk []int32) error {
	return checkSlots("GRApplyMoEC", rk, a.YE.Len()/a.D)
}
