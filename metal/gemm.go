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

// weight uploads a weight matrix in its own format (16-bit bits or float32).
func (j *job) weight(w *kernels.Matrix) mtlBuffer {
	if w.DType == kernels.F32 {
		return j.f32(w.F32)
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

// encodeMatMul encodes y [T, N] = x [T, K] W^T into j (buffers already on the device).
func (b *Backend) encodeMatMul(j *job, y, x mtlBuffer, T int, w *kernels.Matrix, wb mtlBuffer) error {
	fn, variant, consts := gemmKernel(w.DType, false)
	pipe, err := b.pipeline("gemm.metal", fn, consts)
	if err != nil {
		return err
	}
	if wb == nil {
		wb = j.weight(w)
	}
	j.dispatch(pipe, variant, [3]int{(w.N + 31) / 32, (T + 31) / 32, 1}, [3]int{128, 1, 1}, 0,
		y, x, wb, params(T, w.N, w.K))
	return nil
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
	by := j.alloc(4 * len(y))
	if err := b.encodeMatMul(j, by, j.f32(x), T, w, nil); err != nil {
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
	// Slot table on the host (it is T*K integers): rows grouped by expert, the same as the CPU op.
	count := make([]int, E+1)
	for i, e := range idx {
		if e < -1 || int(e) >= E {
			return fmt.Errorf("%s: %w: idx[%d] = %d outside [-1, %d)", op, kernels.ErrArg, i, e, E)
		}
		if e >= 0 {
			count[e+1]++
		}
	}
	for e := 1; e <= E; e++ {
		count[e] += count[e-1]
	}
	used := count[E]
	next := append([]int(nil), count[:E]...)
	xg := make([]float32, used*D)
	for i, e := range idx {
		if e < 0 {
			rk[i] = -1
			continue
		}
		r := next[e]
		next[e]++
		rk[i] = int32(r)
		t := i / K
		copy(xg[r*D:(r+1)*D], x[t*D:(t+1)*D])
	}
	clear(ye)
	if used == 0 {
		return nil
	}
	var tiles []int32
	for e := 0; e < E; e++ {
		for r := count[e]; r < count[e+1]; r += 32 {
			tiles = append(tiles, int32(e), int32(r), int32(min(r+32, count[e+1])))
		}
	}
	ntiles := len(tiles) / 3
	fn, name, consts := gemmKernel(dt, true)
	pg, err := b.pipeline("gemm.metal", fn, consts)
	if err != nil {
		return err
	}
	bf := dt == kernels.BF16
	ps, err := b.pipeline("gemm.metal", "swiglu", []mtlConst{boolConst(0, bf)})
	if err != nil {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	var bgw, bdw mtlBuffer
	if dt == kernels.F32 {
		gu := make([]float32, 0, E*2*I*D)
		dn := make([]float32, 0, E*D*I)
		for e := 0; e < E; e++ {
			gu = append(gu, ex.GateUp[e].F32...)
			dn = append(dn, ex.Down[e].F32...)
		}
		bgw, bdw = j.f32(gu), j.f32(dn)
	} else {
		gu := make([]uint16, 0, E*2*I*D)
		dn := make([]uint16, 0, E*D*I)
		for e := 0; e < E; e++ {
			gu = append(gu, ex.GateUp[e].U16...)
			dn = append(dn, ex.Down[e].U16...)
		}
		bgw, bdw = j.u16(gu), j.u16(dn)
	}
	btiles := j.i32(tiles)
	bgu, bh, by := j.alloc(4*used*2*I), j.alloc(4*used*I), j.alloc(4*used*D)
	j.dispatch(pg, name, [3]int{(2*I + 31) / 32, ntiles, 1}, [3]int{128, 1, 1}, 0,
		bgu, j.f32(xg), bgw, btiles, params(used, 2*I, D))
	j.dispatch(ps, "swiglu_f32", [3]int{(used*I + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0,
		bh, bgu, params(used, I))
	j.dispatch(pg, name, [3]int{(D + 31) / 32, ntiles, 1}, [3]int{128, 1, 1}, 0,
		by, bh, bdw, btiles, params(used, D, I))
	if err := j.finish(); err != nil {
		return err
	}
	copy(ye, f32view(by, used*D))
	return nil
}
