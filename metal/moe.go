package metal

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// Host side of moe.metal: the MoE router, the slot table (moeSlots, which moeExperts in gemm.go
// encodes ahead of the grouped GEMMs), the combine and the GatedResidual write.

// elemThreads is the threadgroup width of the element-wise kernels (one thread per element of
// a row of D): the smallest multiple of 32 covering D, at most 256.
func elemThreads(D int) int { return min(256, (D+31)/32*32) }

// fitWidth is the threadgroup width for pipeline p of a kernel that takes any multiple of 32
// threads (one thread per element, indexed by the threadgroup's position times
// threads_per_threadgroup, the grid sized from the width): want, or the largest multiple of 32
// within p's MaxTotalThreadsPerThreadgroup when that is lower (Apple's compiler lowers a
// pipeline's limit for kernels that need many registers). Kernels that need their full width
// (a threadgroup per row with per-thread arrays, simdgroup tiles of 128 threads) keep it, and a
// pipeline below it is refused by dispatch, naming the kernel and both figures.
func fitWidth(p mtlPipeline, want int) int {
	if m := p.MaxTotalThreadsPerThreadgroup() / 32 * 32; m >= 32 && m < want {
		return m
	}
	return want
}

// moeSlots encodes the MoE slot table for the routed experts idx [T, K] (E experts, rows of D;
// an index outside [0, E) is an empty slot): rk [T, K] gets each slot's row (-1 when empty), and
// it returns xg [T*K, D], the slots' token rows of x [T, D] grouped by expert in expert order
// (slot order within an expert), with the tile table tiles [3*ntiles] (expert, first row, end
// row per tile of at most 32 rows) the grouped GEMMs read: moe_slot_count, moe_slot_plan,
// moe_slot_scatter and moe_slot_gather. Failures are recorded in j.
func (j *Pass) moeSlots(rk, x, idx *Tensor, T, K, E, D int) (xg, tiles *Tensor, ntiles int) {
	var pipes [4]mtlPipeline
	for i, f := range []string{"moe_slot_count", "moe_slot_plan", "moe_slot_scatter", "moe_slot_gather"} {
		p, err := j.b.pipeline("moe.metal", f, nil)
		if err != nil {
			j.fail(err)
			return nil, nil, 0
		}
		pipes[i] = p
	}
	rows := T * K
	ntiles = (rows+31)/32 + E // each expert's last tile may be partial
	prm := paramBytes(moeSlotParams{T: T, K: K, E: E, D: D, Ntiles: ntiles})
	count, base := j.tmp("moe count", E), j.tmp("moe base", E+1)
	tiles, rowtok := j.tmp("moe tiles", 3*ntiles), j.tmp("moe rowtok", rows)
	xg = j.tmp("moe xg", rows*D)
	nc, ns := fitWidth(pipes[0], 256), fitWidth(pipes[2], 256)
	j.dispatch(pipes[0], fmt.Sprintf("moe_slot_count_tg%d", nc), [3]int{(E + nc - 1) / nc, 1, 1}, [3]int{nc, 1, 1}, 0, count, idx, prm)
	j.dispatch(pipes[1], "moe_slot_plan_tg32", [3]int{1, 1, 1}, [3]int{32, 1, 1}, 0, base, tiles, count, prm)
	j.dispatch(pipes[2], fmt.Sprintf("moe_slot_scatter_tg%d", ns), [3]int{(E + ns) / ns, 1, 1}, [3]int{ns, 1, 1}, 0, rk, rowtok, idx, base, prm)
	nt := fitWidth(pipes[3], elemThreads(D))
	j.dispatch(pipes[3], fmt.Sprintf("moe_slot_gather_tg%d", nt), [3]int{(D + nt - 1) / nt, rows, 1}, [3]int{nt, 1, 1}, 0, xg, x, rowtok, base, prm)
	return xg, tiles, ntiles
}

// MoECombine implements op.Pass with moe_comb: out[t] = sum over slots j in slot order of
// w[t, j] * ye[rk[t, j]], skipping rk = -1; float32 with fused multiply-adds (agrees with the CPU
// op to a few float32 ulps of the sum). With K <= 32 it runs moe_comb_slots (valid slots compacted
// by a simd prefix sum first), else moe_comb; both give the same bits. The slot rows are not
// range-checked here (they come from MoEExperts on the device).
func (j *Pass) MoECombine(a op.MoECombine) error {
	const opName = "MoECombine"
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	out, ye, rk, w := j.dev("out", a.Out), j.dev("ye", a.YE), j.dev("rk", a.RK), j.dev("w", a.W)
	if j.err != nil {
		return j.err
	}
	if err := guard32(opName, ye.Len(), a.T*a.D, a.T*a.K); err != nil {
		return j.fail(err)
	}
	def := "moe_comb"
	if a.K <= 32 {
		def = "moe_comb_slots"
	}
	fn := j.b.preferred("moe_comb", def)
	if fn == "moe_comb_slots" && a.K > 32 {
		return j.unsupported(opName, "moe_comb_slots needs K <= 32, have %d", a.K)
	}
	return j.moeCombine(fn, out, ye, rk, w, a.T, a.K, a.D)
}

func (j *Pass) moeCombine(fn string, bo, bye, brk, bw *Tensor, T, K, D int) error {
	if T == 0 {
		return j.err
	}
	pipe, err := j.b.pipeline("moe.metal", fn, nil)
	if err != nil {
		return j.fail(err)
	}
	nt := fitWidth(pipe, elemThreads(D))
	j.dispatch(pipe, fmt.Sprintf("%s_f32_k%d_tg%d", fn, K, nt), [3]int{(D + nt - 1) / nt, T, 1}, [3]int{nt, 1, 1}, 0,
		bo, bye, brk, bw, paramBytes(moeCombParams{T: T, K: K, D: D}))
	return j.err
}

// GRApplyMoEC implements op.Pass with gr_apply_moec (Hn nil) or gr_norm_h_moec (Hn given): per
// token u = sum over slots j in order of w[t, j] * ye[rk[t, j]] + shared[t], then
// H[t, s, :] += beta[t, s] * u as fma(beta, u, H) in float32, and with Hn the next read's grouped
// norm of the updated H in the same pass (each thread reads back only the H elements it wrote).
// gr_norm_h_moec is bitwise equal to gr_apply_moec then gr_norm_h4 (Prefer("gr_norm_h_moec",
// "gr_apply_moec+gr_norm_h4") runs it that way). S <= 8.
func (j *Pass) GRApplyMoEC(a op.GRApplyMoEC) error {
	const opName = "GRApplyMoEC"
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	if a.S > 8 {
		return j.unsupported(opName, "S=%d streams (the kernels take 1..8)", a.S)
	}
	H, Hn, beta := j.dev("H", a.H), j.dev("Hn", a.Hn), j.dev("beta", a.Beta)
	ye, rk, w, sh := j.dev("ye", a.YE), j.dev("rk", a.RK), j.dev("w", a.W), j.dev("shared", a.Shared)
	if j.err != nil {
		return j.err
	}
	if err := guard32(opName, a.T*a.S*a.D, ye.Len()); err != nil {
		return j.fail(err)
	}
	var bn *Tensor
	if Hn != nil {
		bn = j.vec(a.Norm)
	}
	return j.grApply(H, Hn, beta, ye, rk, w, sh, a.T, a.S, a.K, a.D, bn, a.Eps)
}

// grApply runs gr_apply_moec or gr_norm_h_moec; with K = 0 (ye, rk, w nil) and shared = u it is
// the plain GatedResidual write H += beta (x) u.
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
	prm := paramBytes(grApplyParams{T: T, K: K, S: S, D: D, Eps: eps, HasShared: hasShared})
	apply := func() {
		pa, err := b.pipeline("moe.metal", "gr_apply_moec", nil)
		if err != nil {
			j.fail(err)
			return
		}
		nt := fitWidth(pa, elemThreads(D))
		j.dispatch(pa, fmt.Sprintf("gr_apply_moec_f32_s%d_tg%d", S, nt), [3]int{(D + nt - 1) / nt, T, 1}, [3]int{nt, 1, 1}, 0,
			bh, bye, brk, bw, bbeta, bsh, prm)
	}
	switch {
	case bhn == nil:
		apply()
	case b.preferred("gr_norm_h_moec", "gr_norm_h_moec") == "gr_norm_h_moec":
		pipe, err := b.pipeline("moe.metal", "gr_norm_h_moec", nil)
		if err != nil {
			return j.fail(err)
		}
		nt := fitWidth(pipe, elemThreads(D))
		j.dispatch(pipe, fmt.Sprintf("gr_norm_h_moec_f32_s%d_tg%d", S, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 0,
			bh, bhn, bye, brk, bw, bbeta, bnorm, bsh, prm)
	default:
		apply()
		j.grNormH4(bhn, bh, T, S, D, bnorm, eps)
	}
	return j.err
}

// TopKRoute implements op.Pass with moe_route: p = softmax(logits) over E experts in float32, the
// K largest p per token in descending order (ties to the lower expert index), and w = p / sum of
// the K selected when Norm. The probabilities differ from the CPU's float64 softmax by float32
// rounding, so experts whose p agree to about 1e-7 relative may be ranked differently. NaN and
// infinite logits are refused as on the CPU, after the fact: the kernel flags them in a status
// buffer of the Pass, and Commit returns an error wrapping op.ErrInvalidArgument naming the
// first such token of the pass (the pass's outputs are then meaningless; the runner restores
// the session). Limits: K <= 256, E <= 8192.
func (j *Pass) TopKRoute(a op.TopKRoute) error {
	const opName = "TopKRoute"
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	if a.K > 256 || a.E > 8192 {
		return j.unsupported(opName, "top-k %d of %d experts (moe_route takes K <= 256, E <= 8192)", a.K, a.E)
	}
	w, idx, logits := j.dev("w", a.W), j.dev("idx", a.Idx), j.dev("logits", a.Logits)
	if j.err != nil {
		return j.err
	}
	if err := guard32(opName, a.T*a.E); err != nil {
		return j.fail(err)
	}
	return j.route(w, idx, logits, a.T, a.E, a.K, a.Norm)
}

func (j *Pass) route(bw, bi, bl *Tensor, T, E, K int, norm bool) error {
	if T == 0 {
		return j.err
	}
	pipe, err := j.b.pipeline("moe.metal", "moe_route", nil)
	if err != nil {
		return j.fail(err)
	}
	if j.routeStatus == nil {
		// The session's scratch holds it (a prefill allocates nothing new once resident); the
		// previous Pass on this scratch has finished, so the host resets it here.
		if j.routeStatus = j.tmpI32("moe_route.status", 2); j.routeStatus == nil {
			return j.err
		}
		st := j.routeStatus.I32()
		st[0], st[1] = 0, -1 // -1: 0xffffffff, no token yet
	}
	nt := 256
	j.dispatch(pipe, fmt.Sprintf("moe_route_f32_e%d_k%d_tg%d", E, K, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 4*E,
		bw, bi, bl, paramBytes(routeParams{E: E, K: K, Norm: norm}), j.routeStatus)
	return j.err
}

// routeError is the error of a finished Pass whose moe_route dispatches met a NaN or infinite
// logit (nil when none did).
func (j *Pass) routeError() error {
	if j.routeStatus == nil {
		return nil
	}
	st := j.routeStatus.I32()
	if st[0] == 0 {
		return nil
	}
	return fmt.Errorf("TopKRoute: %w: the router logits of token %d (of a pass's rows) hold a NaN or an infinity", op.ErrInvalidArgument, uint32(st[1]))
}
