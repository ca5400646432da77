package metal

import (
	"fmt"
	"math"

	"github.com/stratakernels/strata/kernels"
)

// Host side of the MoE and GatedResidual-write kernels of prompt.metal.

// moeCheckCombine validates a combine's slot table: ye [rows, D], rk and w [T, K], every rk in
// [-1, rows), and the 32-bit offsets of the kernels.
func moeCheckCombine(op string, ye []float32, rows int, rk []int32, w []float32, T, K, D int) error {
	if rows < 0 || T < 0 || K <= 0 || D <= 0 || len(ye) != rows*D || len(rk) != T*K || len(w) != T*K {
		return fmt.Errorf("%s: %w: rows=%d T=%d K=%d D=%d len(ye)=%d len(rk)=%d len(w)=%d",
			op, kernels.ErrShape, rows, T, K, D, len(ye), len(rk), len(w))
	}
	for i, r := range rk {
		if r < -1 || int(r) >= rows {
			return fmt.Errorf("%s: %w: rk[%d] = %d outside [-1, %d)", op, kernels.ErrArg, i, r, rows)
		}
	}
	return guard32(op, rows*D, T*K)
}

// elemThreads is the threadgroup width of the element-wise kernels (one thread per element of
// a row of D): the smallest multiple of 32 covering D, at most 256.
func elemThreads(D int) int { return min(256, (D+31)/32*32) }

// MoECombine is moe_comb (kernels.MoECombine on the device): out[t] = sum over slots j in slot
// order of w[t*K+j] * ye[rk[t*K+j]], skipping rk = -1. ye [rows, D]; rk, w [T, K]; out [T, D];
// float32 with fused multiply-adds (agrees with the CPU op to a few float32 ulps of the sum).
// With K <= 32 it runs moe_comb_slots (valid slots compacted by a simd prefix sum first), else
// moe_comb; both give the same bits. Errors wrap kernels.ErrShape or kernels.ErrArg (rk out of
// range), or the device's errors.
func (b *Backend) MoECombine(out, ye []float32, rows int, rk []int32, w []float32, T, K, D int) error {
	const op = "MoECombine"
	if err := moeCheckCombine(op, ye, rows, rk, w, T, K, D); err != nil {
		return err
	}
	if len(out) != T*D {
		return fmt.Errorf("%s: %w: len(out)=%d, want %d", op, kernels.ErrShape, len(out), T*D)
	}
	if err := guard32(op, T*D); err != nil {
		return err
	}
	if T == 0 {
		return nil
	}
	def := "moe_comb"
	if K <= 32 {
		def = "moe_comb_slots"
	}
	fn := b.preferred("moe_comb", def)
	if fn == "moe_comb_slots" && K > 32 {
		return fmt.Errorf("%s: %w: moe_comb_slots needs K <= 32, have %d", op, kernels.ErrArg, K)
	}
	pipe, err := b.pipeline("prompt.metal", fn, nil)
	if err != nil {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	nt := elemThreads(D)
	bo := j.alloc(4 * T * D)
	j.dispatch(pipe, fmt.Sprintf("%s_f32_k%d_tg%d", fn, K, nt), [3]int{(D + nt - 1) / nt, T, 1}, [3]int{nt, 1, 1}, 0,
		bo, j.f32(ye), j.i32(rk), j.f32(w), params(T, K, D))
	if err := j.finish(); err != nil {
		return err
	}
	copy(out, f32view(bo, T*D))
	return nil
}

// GRApplyMoEC is gr_apply_moec, GatedResidual's write after the MoE with the combine fused in:
// H[t, s, :] += beta[t, s] * u[t], u[t] = sum_j w[t, j] * ye[rk[t, j]] (the MoECombine sum; the
// shared expert enters as one more slot: its gated output as a row of ye with weight 1).
// H [T, S, D] is updated in place; ye [rows, D]; rk, w [T, K]; beta [T, S]. The write is
// fma(beta, u, H) in float32. Errors wrap kernels.ErrShape or kernels.ErrArg.
func (b *Backend) GRApplyMoEC(H, ye []float32, rows int, rk []int32, w, beta []float32, T, K, S, D int) error {
	const op = "GRApplyMoEC"
	if err := grCheckApply(op, H, ye, rows, rk, w, beta, T, K, S, D); err != nil || T == 0 {
		return err
	}
	pipe, err := b.pipeline("prompt.metal", "gr_apply_moec", nil)
	if err != nil {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	nt := elemThreads(D)
	bh := j.f32(H)
	j.dispatch(pipe, fmt.Sprintf("gr_apply_moec_f32_s%d_tg%d", S, nt), [3]int{(D + nt - 1) / nt, T, 1}, [3]int{nt, 1, 1}, 0,
		bh, j.f32(ye), j.i32(rk), j.f32(w), j.f32(beta), params(T, K, S, D, float32(0)))
	if err := j.finish(); err != nil {
		return err
	}
	copy(H, f32view(bh, len(H)))
	return nil
}

func grCheckApply(op string, H, ye []float32, rows int, rk []int32, w, beta []float32, T, K, S, D int) error {
	if err := moeCheckCombine(op, ye, rows, rk, w, T, K, D); err != nil {
		return err
	}
	if S <= 0 || S > 8 || len(H) != T*S*D || len(beta) != T*S {
		return fmt.Errorf("%s: %w: T=%d S=%d D=%d len(H)=%d len(beta)=%d (S must be 1..8)",
			op, kernels.ErrShape, T, S, D, len(H), len(beta))
	}
	return guard32(op, T*S*D)
}

// GRNormHMoEC is gr_norm_h_moec: GRApplyMoEC followed by the next GatedResidual read's grouped
// norm, fused per token: H[t, s] += beta[t, s] * u[t]; Hn[t, s] = RMSNorm1p(H[t, s]) with
// weights hw[s*D:(s+1)*D]. H [T, S, D] is updated in place, Hn [T, S, D] written, hw [S*D].
// Bitwise equal to GRApplyMoEC then GRNormH4 (Prefer("gr_norm_h_moec",
// "gr_apply_moec+gr_norm_h4") runs it that way). Errors wrap kernels.ErrShape or kernels.ErrArg.
func (b *Backend) GRNormHMoEC(H, Hn, ye []float32, rows int, rk []int32, w, beta, hw []float32, T, K, S, D int, eps float32) error {
	const op = "GRNormHMoEC"
	if err := grCheckApply(op, H, ye, rows, rk, w, beta, T, K, S, D); err != nil {
		return err
	}
	if len(Hn) != T*S*D || len(hw) != S*D {
		return fmt.Errorf("%s: %w: len(Hn)=%d len(hw)=%d, want %d and %d", op, kernels.ErrShape, len(Hn), len(hw), T*S*D, S*D)
	}
	if !(eps >= 0) || math.IsInf(float64(eps), 1) {
		return fmt.Errorf("%s: %w: eps=%g", op, kernels.ErrArg, eps)
	}
	if T == 0 {
		return nil
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	bh, bhn := j.f32(H), j.alloc(4*len(Hn))
	bye, brk, bw, bbeta, bhw := j.f32(ye), j.i32(rk), j.f32(w), j.f32(beta), j.f32(hw)
	nt := elemThreads(D)
	if b.preferred("gr_norm_h_moec", "gr_norm_h_moec") == "gr_norm_h_moec" {
		pipe, err := b.pipeline("prompt.metal", "gr_norm_h_moec", nil)
		if err != nil {
			return err
		}
		j.dispatch(pipe, fmt.Sprintf("gr_norm_h_moec_f32_s%d_tg%d", S, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 0,
			bh, bhn, bye, brk, bw, bbeta, bhw, params(T, K, S, D, eps))
	} else {
		pa, err := b.pipeline("prompt.metal", "gr_apply_moec", nil)
		if err != nil {
			return err
		}
		pn, err := b.pipeline("prompt.metal", "gr_norm_h4", nil)
		if err != nil {
			return err
		}
		j.dispatch(pa, fmt.Sprintf("gr_apply_moec_f32_s%d_tg%d", S, nt), [3]int{(D + nt - 1) / nt, T, 1}, [3]int{nt, 1, 1}, 0,
			bh, bye, brk, bw, bbeta, params(T, K, S, D, eps))
		j.dispatch(pn, fmt.Sprintf("gr_norm_h4_f32_s%d_tg%d", S, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 0,
			bhn, bh, bhw, params(D, S, eps))
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(H, f32view(bh, len(H)))
	copy(Hn, f32view(bhn, len(Hn)))
	return nil
}

// TopKRoute is moe_route (kernels.TopKRoute on the device): p = softmax(logits) over E experts in
// float32, the K largest p per token in descending order (ties to the lower expert index), and
// w = p / sum of the K selected when norm. logits [T, E]; w, idx [T, K]. The probabilities
// differ from the CPU's float64 softmax by float32 rounding, so experts whose p agree to about
// 1e-7 relative may be ranked differently. Errors wrap kernels.ErrShape or kernels.ErrArg (K
// outside [1, E], E > 8192, a NaN or infinite logit).
func (b *Backend) TopKRoute(w []float32, idx []int32, logits []float32, T, E, K int, norm bool) error {
	const op = "TopKRoute"
	if T < 0 || E <= 0 || len(logits) != T*E || len(w) != T*K || len(idx) != T*K {
		return fmt.Errorf("%s: %w: T=%d E=%d K=%d len(logits)=%d len(w)=%d len(idx)=%d",
			op, kernels.ErrShape, T, E, K, len(logits), len(w), len(idx))
	}
	if K < 1 || K > E || K > 256 || E > 8192 {
		return fmt.Errorf("%s: %w: top-k %d of %d experts (K <= 256, E <= 8192)", op, kernels.ErrArg, K, E)
	}
	for i, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%s: %w: logit %d (token %d) is %g", op, kernels.ErrArg, i, i/E, v)
		}
	}
	if err := guard32(op, T*E); err != nil || T == 0 {
		return err
	}
	pipe, err := b.pipeline("prompt.metal", "moe_route", nil)
	if err != nil {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	nt := 256
	bw, bi := j.alloc(4*T*K), j.alloc(4*T*K)
	j.dispatch(pipe, fmt.Sprintf("moe_route_f32_e%d_k%d_tg%d", E, K, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 4*E,
		bw, bi, j.f32(logits), params(E, K, norm))
	if err := j.finish(); err != nil {
		return err
	}
	copy(w, f32view(bw, T*K))
	copy(idx, i32view(bi, T*K))
	return nil
}
