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
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	bo := j.alloc(T * D)
	if err := j.moeCombine(fn, bo, j.f32(ye), j.i32(rk), j.f32(w), T, K, D); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(out, f32view(bo, T*D))
	return nil
}

// MoECombine encodes moe_comb (Backend.MoECombine on device tensors): out [T, D] from ye
// [rows, D], rk [T*K] int32 and w [T*K]; rk is not range-checked here (MoEExperts writes it).
// Errors wrap kernels.ErrShape or kernels.ErrArg.
func (j *Pass) MoECombine(out, ye, rk, w *Tensor, T, K, D int) error {
	if T < 0 || K <= 0 || D <= 0 || out.Len() < T*D || rk.Len() < T*K || w.Len() < T*K {
		return j.fail(fmt.Errorf("MoECombine: %w: T=%d K=%d D=%d", kernels.ErrShape, T, K, D))
	}
	def := "moe_comb"
	if K <= 32 {
		def = "moe_comb_slots"
	}
	fn := j.b.preferred("moe_comb", def)
	if fn == "moe_comb_slots" && K > 32 {
		return j.fail(fmt.Errorf("MoECombine: %w: moe_comb_slots needs K <= 32, have %d", kernels.ErrArg, K))
	}
	return j.moeCombine(fn, out, ye, rk, w, T, K, D)
}

func (j *Pass) moeCombine(fn string, bo, bye, brk, bw *Tensor, T, K, D int) error {
	if T == 0 {
		return j.err
	}
	pipe, err := j.b.pipeline("prompt.metal", fn, nil)
	if err != nil {
		return j.fail(err)
	}
	nt := elemThreads(D)
	j.dispatch(pipe, fmt.Sprintf("%s_f32_k%d_tg%d", fn, K, nt), [3]int{(D + nt - 1) / nt, T, 1}, [3]int{nt, 1, 1}, 0,
		bo, bye, brk, bw, params(T, K, D))
	return j.err
}

// GRApplyMoEC is gr_apply_moec (kernels.GRApplyMoEC on the device): the MoE combine fused into
// the GatedResidual write. Per token u = sum over slots j in order of w[t, j] * ye[rk[t, j]]
// + shared[t] (the gated shared-expert output; nil for none), then H[t, s, :] += beta[t, s] * u
// as fma(beta, u, H) in float32. H [T, S*D] updated in place; beta [T, S]; ye [rows, D]; rk, w
// [T, K]; shared [T, D] or nil. S <= 8. Errors wrap kernels.ErrShape or kernels.ErrArg.
func (b *Backend) GRApplyMoEC(H, beta, ye []float32, rows int, rk []int32, w, shared []float32, T, S, K, D int) error {
	if err := moeCheckCombine("GRApplyMoEC", ye, rows, rk, w, T, K, D); err != nil {
		return err
	}
	return b.grApplyMoEC("GRApplyMoEC", H, nil, beta, ye, rows, rk, w, shared, T, S, K, D, nil, 0)
}

// GRNormHMoEC is gr_norm_h_moec (kernels.GRNormHMoEC on the device): GRApplyMoEC followed by the
// next read's grouped norm in one pass per token, Hn [T, S*D] = grouped RMSNorm1p(H after the
// write; norm [S*D], eps). Each thread reads back only the H elements it wrote. Bitwise equal
// to GRApplyMoEC then RMSNorm1pGrouped on this backend (Prefer("gr_norm_h_moec",
// "gr_apply_moec+gr_norm_h4") runs it that way). Errors wrap kernels.ErrShape or kernels.ErrArg.
func (b *Backend) GRNormHMoEC(H, Hn, beta, ye []float32, rows int, rk []int32, w, shared []float32, T, S, K, D int,
	norm []float32, eps float32) error {
	const op = "GRNormHMoEC"
	if len(Hn) != T*S*D || len(norm) != S*D {
		return fmt.Errorf("%s: %w: len(Hn)=%d len(norm)=%d, want %d and %d", op, kernels.ErrShape, len(Hn), len(norm), T*S*D, S*D)
	}
	if err := checkEps(op, eps); err != nil {
		return err
	}
	if err := moeCheckCombine(op, ye, rows, rk, w, T, K, D); err != nil {
		return err
	}
	return b.grApplyMoEC(op, H, Hn, beta, ye, rows, rk, w, shared, T, S, K, D, norm, eps)
}

// grApplyMoEC runs gr_apply_moec or gr_norm_h_moec (the combine table checked by the caller);
// with K = 0 and shared = u it is the plain GatedResidual write H += beta (x) u.
func (b *Backend) grApplyMoEC(op string, H, Hn, beta, ye []float32, rows int, rk []int32, w, shared []float32,
	T, S, K, D int, norm []float32, eps float32) error {
	if S <= 0 || S > 8 || len(H) != T*S*D || len(beta) != T*S || (shared != nil && len(shared) != T*D) {
		return fmt.Errorf("%s: %w: T=%d S=%d D=%d len(H)=%d len(beta)=%d len(shared)=%d (S must be 1..8)",
			op, kernels.ErrShape, T, S, D, len(H), len(beta), len(shared))
	}
	if err := guard32(op, T*S*D); err != nil || T == 0 {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	bh, bye, brk, bw, bbeta := j.f32(H), j.f32(ye), j.i32(rk), j.f32(w), j.f32(beta)
	var bsh, bhn, bnorm *Tensor
	if shared != nil {
		bsh = j.f32(shared)
	}
	if Hn != nil {
		bhn, bnorm = j.alloc(len(Hn)), j.f32(norm)
	}
	if err := j.grApply(bh, bhn, bbeta, bye, brk, bw, bsh, T, S, K, D, bnorm, eps); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(H, f32view(bh, len(H)))
	if Hn != nil {
		copy(Hn, f32view(bhn, len(Hn)))
	}
	return nil
}

// GRApply encodes the GatedResidual write with the MoE combine fused in (Backend.GRApplyMoEC,
// GRNormHMoEC, GRWrite and GRWriteNormH on device tensors): H [T, S*D] += beta [T, S] (x)
// (combine(ye, rk, w) + shared), K = 0 (ye, rk, w nil) for no routed slots, shared nil for none;
// with Hn set also Hn = grouped RMSNorm1p(H; norm [S*D], a model weight). Errors wrap
// kernels.ErrShape or kernels.ErrArg.
func (j *Pass) GRApply(H, Hn, beta, ye, rk, w, shared *Tensor, T, S, K, D int, norm []float32, eps float32) error {
	const op = "GRApply"
	if T < 0 || S <= 0 || S > 8 || D <= 0 || K < 0 || H.Len() < T*S*D || beta.Len() < T*S ||
		(shared != nil && shared.Len() < T*D) || (Hn != nil && (Hn.Len() < T*S*D || len(norm) != S*D)) ||
		(K > 0 && (ye == nil || rk == nil || w == nil || rk.Len() < T*K || w.Len() < T*K)) {
		return j.fail(fmt.Errorf("%s: %w: T=%d S=%d K=%d D=%d (S must be 1..8)", op, kernels.ErrShape, T, S, K, D))
	}
	if err := checkEps(op, eps); err != nil {
		return j.fail(err)
	}
	var bn *Tensor
	if Hn != nil {
		bn = j.vec(norm)
	}
	return j.grApply(H, Hn, beta, ye, rk, w, shared, T, S, K, D, bn, eps)
}

func (j *Pass) grApply(bh, bhn, bbeta, bye, brk, bw, bsh *Tensor, T, S, K, D int, bnorm *Tensor, eps float32) error {
	if T == 0 {
		return j.err
	}
	b := j.b
	hasShared := bsh != nil
	dummy := func(t *Tensor) *Tensor {
		if t == nil {
			return bh
		}
		return t
	}
	bye, brk, bw, bsh = dummy(bye), dummy(brk), dummy(bw), dummy(bsh)
	prm := params(T, K, S, D, eps, hasShared)
	nt := elemThreads(D)
	apply := func() {
		pa, err := b.pipeline("prompt.metal", "gr_apply_moec", nil)
		if err != nil {
			j.fail(err)
			return
		}
		j.dispatch(pa, fmt.Sprintf("gr_apply_moec_f32_s%d_tg%d", S, nt), [3]int{(D + nt - 1) / nt, T, 1}, [3]int{nt, 1, 1}, 0,
			bh, bye, brk, bw, bbeta, bsh, prm)
	}
	switch {
	case bhn == nil:
		apply()
	case b.preferred("gr_norm_h_moec", "gr_norm_h_moec") == "gr_norm_h_moec":
		pipe, err := b.pipeline("prompt.metal", "gr_norm_h_moec", nil)
		if err != nil {
			return j.fail(err)
		}
		j.dispatch(pipe, fmt.Sprintf("gr_norm_h_moec_f32_s%d_tg%d", S, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 0,
			bh, bhn, bye, brk, bw, bbeta, bnorm, bsh, prm)
	default:
		apply()
		j.grNormH4(bhn, bh, T, S, D, bnorm, eps)
	}
	return j.err
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
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	bw, bi := j.alloc(T*K), j.alloc(T*K)
	if err := j.route(bw, bi, j.f32(logits), T, E, K, norm); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(w, f32view(bw, T*K))
	copy(idx, i32view(bi, T*K))
	return nil
}

// TopKRoute encodes moe_route (Backend.TopKRoute on device tensors): w [T*K] and idx [T*K]
// int32 from logits [T, E]. The logits are not checked for NaN or infinities here (they are
// on the device); a NaN logit ranks as the kernel's comparisons make it.
// Errors wrap kernels.ErrShape or kernels.ErrArg.
func (j *Pass) TopKRoute(w, idx, logits *Tensor, T, E, K int, norm bool) error {
	if T < 0 || E <= 0 || logits.Len() < T*E || w.Len() < T*K || idx.Len() < T*K {
		return j.fail(fmt.Errorf("TopKRoute: %w: T=%d E=%d K=%d", kernels.ErrShape, T, E, K))
	}
	if K < 1 || K > E || K > 256 || E > 8192 {
		return j.fail(fmt.Errorf("TopKRoute: %w: top-k %d of %d experts (K <= 256, E <= 8192)", kernels.ErrArg, K, E))
	}
	return j.route(w, idx, logits, T, E, K, norm)
}

func (j *Pass) route(bw, bi, bl *Tensor, T, E, K int, norm bool) error {
	if T == 0 {
		return j.err
	}
	pipe, err := j.b.pipeline("prompt.metal", "moe_route", nil)
	if err != nil {
		return j.fail(err)
	}
	nt := 256
	j.dispatch(pipe, fmt.Sprintf("moe_route_f32_e%d_k%d_tg%d", E, K, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 4*E,
		bw, bi, bl, params(E, K, norm))
	return j.err
}
