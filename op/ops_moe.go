package op

import (
	"fmt"
	"math"
)

// TopKRoute is the MoE router after the logits GEMM: p = softmax(Logits[t]) over all E experts
// (float64 sums), the top K of p with exact ties to the lower expert index (torch.topk's order
// is unspecified; strata's rule is documented and tested), renormalised to sum 1 when Norm
// (norm_topk_prob). Source: Qwen3NextTopKRouter / Qwen4ExpTextTopKRouter.
type TopKRoute struct {
	W, Idx, Logits Tensor // F32 [T, K], I32 [T, K], F32 [T, E]
	T, E, K        int
	Norm           bool
}

// Check validates the shapes (not the logit values: CheckLogits). Errors wrap ErrShape or
// ErrInvalidArgument.
func (a TopKRoute) Check() error {
	const op = "TopKRoute"
	if a.T < 0 || a.E <= 0 || a.E > math.MaxInt32 {
		return fmt.Errorf("%s: %w: T=%d E=%d", op, ErrShape, a.T, a.E)
	}
	if err := checkElems(op, "logits", a.T, a.E); err != nil {
		return err
	}
	if a.K < 1 || a.K > a.E {
		return fmt.Errorf("%s: %w: top-k %d of %d experts", op, ErrInvalidArgument, a.K, a.E)
	}
	return firstErr(need(op, "logits", a.Logits, F32, a.T*a.E), need(op, "w", a.W, F32, a.T*a.K),
		need(op, "idx", a.Idx, I32, a.T*a.K))
}

// CheckLogits refuses NaN and Inf logits (the routing would be meaningless). Errors wrap
// ErrInvalidArgument.
func (a TopKRoute) CheckLogits(logits []float32) error {
	for i, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("TopKRoute: %w: logit %d (token %d) is %g", ErrInvalidArgument, i, i/a.E, v)
		}
	}
	return nil
}

// MoEExperts runs the routed experts without their routing weights. Slots (t, j) with
// Idx[t, j] = e >= 0 are grouped by expert (expert order, then slot order) into consecutive
// rows of YE; RK[t, j] receives the row of slot (t, j) (-1 for an empty slot, Idx = -1); row r
// holds down_e(silu(gate_e x_t) * up_e x_t) for its slot. Rows past the used ones are
// unspecified (no op reads them: the combines read the rows RK names; the CPU zeroes them).
// Source: Qwen3NextExperts / Qwen4ExpTextExperts (the combine is MoECombine / GRApplyMoEC).
type MoEExperts struct {
	YE, RK, X Tensor // F32 [T*K, D], I32 [T, K], F32 [T, D]
	Idx       Tensor // I32 [T, K] expert per slot, -1 = empty
	T, K      int
	Ex        *Experts
}

// Check validates the shapes (not the expert indices: CheckIdx). Errors wrap ErrShape,
// ErrDType or ErrInvalidArgument.
func (a MoEExperts) Check() error {
	const op = "MoEExperts"
	if err := a.Ex.Validate(op); err != nil {
		return err
	}
	D := a.Ex.D
	if a.T < 0 || a.K <= 0 {
		return fmt.Errorf("%s: %w: T=%d K=%d", op, ErrShape, a.T, a.K)
	}
	if err := firstErr(checkElems(op, "ye", a.T, a.K, D), checkElems(op, "gate_up rows", a.T, a.K, 2*a.Ex.I)); err != nil {
		return err
	}
	return firstErr(need(op, "x", a.X, F32, a.T*D), need(op, "idx", a.Idx, I32, a.T*a.K),
		need(op, "rk", a.RK, I32, a.T*a.K), need(op, "ye", a.YE, F32, a.T*a.K*D))
}

// CheckIdx validates host expert indices. Errors wrap ErrInvalidArgument.
func (a MoEExperts) CheckIdx(idx []int32) error {
	for i, e := range idx {
		if e < -1 || int(e) >= a.Ex.E {
			return fmt.Errorf("MoEExperts: %w: idx[%d] = %d outside [-1, %d)", ErrInvalidArgument, i, e, a.Ex.E)
		}
	}
	return nil
}

// MoECombine is moe_comb: Out[t] = sum over slots j (in slot order) of W[t, j] * YE[RK[t, j]],
// skipping empty slots (RK = -1).
type MoECombine struct {
	Out, YE, RK, W Tensor // F32 [T, D], F32 [rows, D], I32 [T, K], F32 [T, K]
	T, K, D        int
}

// Check validates the shapes (not the slot rows: CheckSlots). Errors wrap ErrShape or
// ErrInvalidArgument.
func (a MoECombine) Check() error {
	const op = "MoECombine"
	if err := checkElems(op, "out", a.T, a.D); err != nil {
		return err
	}
	if err := checkCombine(op, a.YE, a.RK, a.W, a.T, a.K, a.D); err != nil {
		return err
	}
	return need(op, "out", a.Out, F32, a.T*a.D)
}

// CheckSlots validates host slot rows against the expert rows. Errors wrap ErrInvalidArgument.
func (a MoECombine) CheckSlots(rk []int32) error { return checkSlots("MoECombine", rk, a.YE.Len()/a.D) }

func checkCombine(op string, ye, rk, w Tensor, T, K, D int) error {
	if T < 0 || K <= 0 || D <= 0 {
		return fmt.Errorf("%s: %w: T=%d K=%d D=%d", op, ErrShape, T, K, D)
	}
	if !Present(ye) {
		return fmt.Errorf("%s: %w: ye is missing", op, ErrInvalidArgument)
	}
	if err := checkElems(op, "rk", T, K); err != nil {
		return err
	}
	if ye.Len()%D != 0 {
		return fmt.Errorf("%s: %w: len(ye)=%d is not a whole number of rows of D=%d", op, ErrShape, ye.Len(), D)
	}
	return firstErr(need(op, "ye", ye, F32, ye.Len()), need(op, "rk", rk, I32, T*K), need(op, "w", w, F32, T*K))
}

func checkSlots(op string, rk []int32, rows int) error {
	for i, r := range rk {
		if r < -1 || int(r) >= rows {
			return fmt.Errorf("%s: %w: rk[%d] = %d outside [-1, %d)", op, ErrInvalidArgument, i, r, rows)
		}
	}
	return nil
}
