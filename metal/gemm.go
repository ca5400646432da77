package metal

import (
	"fmt"

	"github.com/stratakernels/strata/kernels"
)

// Host side of gemm.metal.

func gemmWeight(op string, w *kernels.Matrix) error {
	if w == nil || w.N <= 0 || w.K <= 0 {
		return fmt.Errorf("%s: %w: missing or empty weight", op, kernels.ErrArg)
	}
	switch w.DType {
	case kernels.BF16, kernels.F16:
		if len(w.U16) != w.N*w.K {
			return fmt.Errorf("%s: %w: %v weight [%d, %d] has %d elements", op, kernels.ErrShape, w.DType, w.N, w.K, len(w.U16))
		}
	case kernels.F32:
		if len(w.F32) != w.N*w.K {
			return fmt.Errorf("%s: %w: F32 weight [%d, %d] has %d elements", op, kernels.ErrShape, w.N, w.K, len(w.F32))
		}
	default:
		return fmt.Errorf("%s: %w: %v weight (gemm takes BF16, F16 or F32)", op, kernels.ErrDType, w.DType)
	}
	return guard32(op, w.N*w.K)
}

// weight returns a weight matrix on the device in its own format (16-bit bits or float32): from
// the Pass's Weights when it has them, else uploaded for this Pass.
func (j *Pass) weight(w *kernels.Matrix) mtlBuffer {
	if j.err != nil {
		return nil
	}
	if j.w != nil {
		buf, err := j.w.matrix(w)
		if err != nil {
			j.fail(err)
			return nil
		}
		return buf
	}
	if w.DType == kernels.F32 {
		t := j.f32(w.F32)
		if t == nil {
			return nil
		}
		return t.buf
	}
	return j.u16(w.U16)
}

// gemmKernel names the kernel and variant of a weight's dtype: gemm_w16 (function constant 0
// selects bfloat16 or half widening) or gemm_w32.
func gemmKernel(dt kernels.DType, grouped bool) (fn, variant string, consts []mtlConst) {
	fn = "gemm_w16"
	if dt == kernels.F32 {
		fn = "gemm_w32"
	}
	if grouped {
		fn += "_grouped"
	}
	if dt == kernels.F32 {
		variant = fn + "_bm32_bn32_bk16"
	} else {
		variant = fmt.Sprintf("%s_%s_bm32_bn32_bk16", fn, dt)
	}
	return fn, variant, []mtlConst{boolConst(0, dt == kernels.BF16)}
}

// encodeMatMul encodes y [T, N] = x [T, K] W^T into j (tensors already on the device).
func (b *Backend) encodeMatMul(j *Pass, y, x *Tensor, T int, w *kernels.Matrix) error {
	fn, variant, consts := gemmKernel(w.DType, false)
	pipe, err := b.pipeline("gemm.metal", fn, consts)
	if err != nil {
		return j.fail(err)
	}
	j.dispatch(pipe, variant, [3]int{(w.N + 31) / 32, (T + 31) / 32, 1}, [3]int{128, 1, 1}, 0,
		y, x, j.weight(w), params(T, w.N, w.K))
	return j.err
}

// MatMul encodes y [T, N] = x [T, K] W^T (Backend.MatMul on device tensors).
// Errors wrap kernels.ErrShape, kernels.ErrArg or kernels.ErrDType.
func (j *Pass) MatMul(y, x *Tensor, T int, w *kernels.Matrix) error {
	const op = "MatMul"
	if err := gemmWeight(op, w); err != nil {
		return j.fail(err)
	}
	if T < 0 || x.Len() < T*w.K || y.Len() < T*w.N {
		return j.fail(fmt.Errorf("%s: %w: T=%d, weight [%d, %d], len(x)=%d len(y)=%d", op, kernels.ErrShape, T, w.N, w.K, x.Len(), y.Len()))
	}
	if T == 0 {
		return j.err
	}
	return j.b.encodeMatMul(j, y, x, T, w)
}

// MatMul is gemm_w16 / gemm_w32 (kernels.MatMul on the device): y [T, N] = x [T, K] W^T for
// W [N, K] in BF16 or F16 (function constant 0 selects the widening, exact either way) or F32,
// float32 accumulation on 8x8 simdgroup matrices in tiles of 32 x 32, K in steps of 16.
// Agreement with the CPU op: a few float32 ulps of sum |x||w| per element (different summation
// order). Variant names: gemm_w16_bf16_bm32_bn32_bk16, gemm_w32_bm32_bn32_bk16. Errors wrap
// kernels.ErrShape, kernels.ErrArg or kernels.ErrDType.
func (b *Backend) MatMul(y, x []float32, T int, w *kernels.Matrix) error {
	const op = "MatMul"
	if err := gemmWeight(op, w); err != nil {
		return err
	}
	if T < 0 || len(x) != T*w.K || len(y) != T*w.N {
		return fmt.Errorf("%s: %w: T=%d, weight [%d, %d], len(x)=%d len(y)=%d", op, kernels.ErrShape, T, w.N, w.K, len(x), len(y))
	}
	if err := guard32(op, T*w.K, T*w.N); err != nil || T == 0 {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	by := j.alloc(len(y))
	if err := b.encodeMatMul(j, by, j.f32(x), T, w); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(y, f32view(by, len(y)))
	return nil
}

// MoEExperts is the routed experts (kernels.MoEExperts on the device) for 16-bit expert weights
// of one dtype: slots grouped by expert (expert order, then token order, exactly the rows the
// CPU op produces), then per expert h = silu(x Wg^T) * (x Wu^T), out = h Wd^T, as two grouped
// GEMMs (gemm_w16_grouped) with swiglu between them, all in one command buffer. The unweighted
// output of slot (t, j) lands in row rk[t*K+j] of ye; idx = -1 marks an empty slot (rk = -1);
// unused tail rows of ye are zero. x [T, D]; idx, rk [T, K]; ye [T*K, D].
// Errors wrap kernels.ErrShape, kernels.ErrArg (expert index outside [-1, E)) or kernels.ErrDType
// (mixed dtypes). F32 experts run gemm_w32_grouped.
func (b *Backend) MoEExperts(ye []float32, rk []int32, x []float32, T int, idx []int32, K int, ex *kernels.Experts) error {
	const op = "MoEExperts"
	if ex == nil || ex.E <= 0 || ex.D <= 0 || ex.I <= 0 || len(ex.GateUp) != ex.E || len(ex.Down) != ex.E {
		return fmt.Errorf("%s: %w: experts missing or inconsistent", op, kernels.ErrShape)
	}
	D, I, E := ex.D, ex.I, ex.E
	dt := ex.GateUp[0].DType
	for e := 0; e < E; e++ {
		gu, dn := ex.GateUp[e], ex.Down[e]
		if err := gemmWeight(op, gu); err != nil {
			return fmt.Errorf("expert %d gate_up: %w", e, err)
		}
		if err := gemmWeight(op, dn); err != nil {
			return fmt.Errorf("expert %d down: %w", e, err)
		}
		if gu.N != 2*I || gu.K != D || dn.N != D || dn.K != I {
			return fmt.Errorf("%s: %w: expert %d gate_up [%d, %d] down [%d, %d], want [%d, %d] and [%d, %d]",
				op, kernels.ErrShape, e, gu.N, gu.K, dn.N, dn.K, 2*I, D, D, I)
		}
		if gu.DType != dt || dn.DType != dt {
			return fmt.Errorf("%s: %w: expert %d mixes %v and %v weights", op, kernels.ErrDType, e, gu.DType, dn.DType)
		}
	}
	if T < 0 || K <= 0 || len(x) != T*D || len(idx) != T*K || len(rk) != T*K || len(ye) != T*K*D {
		return fmt.Errorf("%s: %w: T=%d K=%d D=%d len(x)=%d len(idx)=%d len(rk)=%d len(ye)=%d",
			op, kernels.ErrShape, T, K, D, len(x), len(idx), len(rk), len(ye))
	}
	if err := guard32(op, T*K*D, T*K*2*I, E*2*I*D); err != nil {
		return err
	}
	for i, e := range idx {
		if e < -1 || int(e) >= E {
			return fmt.Errorf("%s: %w: idx[%d] = %d outside [-1, %d)", op, kernels.ErrArg, i, e, E)
		}
	}
	if T == 0 {
		return nil
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	bye, brk := j.alloc(T*K*D), j.alloc(T*K)
	if err := j.moeExperts(bye, brk, j.f32(x), T, j.i32(idx), K, ex); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(rk, i32view(brk, T*K))
	used := 0
	for _, r := range rk {
		if r >= 0 {
			used++
		}
	}
	clear(ye)
	copy(ye, f32view(bye, used*D))
	return nil
}

// MoEExperts encodes the routed experts (Backend.MoEExperts on device tensors, the expert
// weights checked by the caller): ye [T*K, D] and rk [T*K] int32 from x [T, D] and the routed
// experts idx [T*K] int32 (from Route). The slot table is built on the device
// (moe_slot_count, moe_slot_plan, moe_slot_scatter, moe_slot_gather: the CPU op's row order);
// rows of ye past the used ones are left as they were. Errors wrap kernels.ErrShape.
func (j *Pass) MoEExperts(ye, rk, x *Tensor, T int, idx *Tensor, K int, ex *kernels.Experts) error {
	if ex == nil || ex.E <= 0 || len(ex.GateUp) != ex.E || len(ex.Down) != ex.E {
		return j.fail(fmt.Errorf("MoEExperts: %w: experts missing or inconsistent", kernels.ErrShape))
	}
	if err := guard32("MoEExperts", T*K*ex.D, T*K*2*ex.I, ex.E*2*ex.I*ex.D); err != nil {
		return j.fail(err)
	}
	if x.Len() < T*ex.D || idx.Len() < T*K || rk.Len() < T*K || ye.Len() < T*K*ex.D {
		return j.fail(fmt.Errorf("MoEExperts: %w: tensors too small for T=%d K=%d D=%d", kernels.ErrShape, T, K, ex.D))
	}
	return j.moeExperts(ye, rk, x, T, idx, K, ex)
}

func (j *Pass) moeExperts(ye, rk, x *Tensor, T int, idx *Tensor, K int, ex *kernels.Experts) error {
	b := j.b
	D, I, E := ex.D, ex.I, ex.E
	dt := ex.GateUp[0].DType
	var pipes [6]mtlPipeline
	fn, name, consts := gemmKernel(dt, true)
	for i, f := range []string{"moe_slot_count", "moe_slot_plan", "moe_slot_scatter", "moe_slot_gather"} {
		p, err := b.pipeline("prompt.metal", f, nil)
		if err != nil {
			return j.fail(err)
		}
		pipes[i] = p
	}
	var err error
	if pipes[4], err = b.pipeline("gemm.metal", fn, consts); err != nil {
		return j.fail(err)
	}
	if pipes[5], err = b.pipeline("gemm.metal", "swiglu", []mtlConst{boolConst(0, dt == kernels.BF16)}); err != nil {
		return j.fail(err)
	}
	var bgw, bdw mtlBuffer
	if j.w != nil {
		if bgw, bdw, err = j.w.experts(ex); err != nil {
			return j.fail(err)
		}
	} else if bgw, bdw, err = uploadExperts(ex, func(n int) (mtlBuffer, error) {
		t := j.alloc((n + 3) / 4)
		if t == nil {
			return nil, j.err
		}
		return t.buf, nil
	}); err != nil {
		return j.fail(err)
	}
	rows := T * K
	ntiles := (rows+31)/32 + E // each expert's last tile may be partial
	prm := params(T, K, E, D, ntiles)
	count, base := j.tmp("moe count", E), j.tmp("moe base", E+1)
	tiles, rowtok := j.tmp("moe tiles", 3*ntiles), j.tmp("moe rowtok", rows)
	xg, gu, h := j.tmp("moe xg", rows*D), j.tmp("moe gate_up", rows*2*I), j.tmp("moe h", rows*I)
	j.dispatch(pipes[0], "moe_slot_count_tg256", [3]int{(E + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0, count, idx, prm)
	j.dispatch(pipes[1], "moe_slot_plan_tg32", [3]int{1, 1, 1}, [3]int{32, 1, 1}, 0, base, tiles, count, prm)
	j.dispatch(pipes[2], "moe_slot_scatter_tg256", [3]int{(E + 256) / 256, 1, 1}, [3]int{256, 1, 1}, 0, rk, rowtok, idx, base, prm)
	nt := elemThreads(D)
	j.dispatch(pipes[3], fmt.Sprintf("moe_slot_gather_tg%d", nt), [3]int{(D + nt - 1) / nt, rows, 1}, [3]int{nt, 1, 1}, 0, xg, x, rowtok, base, prm)
	j.dispatch(pipes[4], name, [3]int{(2*I + 31) / 32, ntiles, 1}, [3]int{128, 1, 1}, 0,
		gu, xg, bgw, tiles, params(rows, 2*I, D))
	j.dispatch(pipes[5], "swiglu_f32", [3]int{(rows*I + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0,
		h, gu, params(rows, I))
	j.dispatch(pipes[4], name, [3]int{(D + 31) / 32, ntiles, 1}, [3]int{128, 1, 1}, 0,
		ye, h, bdw, tiles, params(rows, D, I))
	return j.err
}
