package metal

import (
	"fmt"
	"strings"

	"github.com/stratakernels/strata/op"
)

// Host side of gemm.metal.

// weight returns a weight matrix on the device in its own format (16-bit bits or float32) from
// the Pass's Weights (uploaded on first use).
func (j *Pass) weight(w *op.Matrix) mtlBuffer {
	if j.err != nil {
		return nil
	}
	buf, err := j.w.matrix(w)
	if err != nil {
		j.fail(err)
		return nil
	}
	return buf
}

// gemmTile is one GEMM kernel choice: the kernel function, its variant name, its function
// constants and its output tile (bm rows x bn columns per threadgroup of 128 threads).
type gemmTile struct {
	fn, variant string
	consts      []mtlConst
	bm, bn      int
}

// gemmKernel picks the GEMM kernel of a weight's dtype: gemm_w16 (function constant 0 selects
// bfloat16 or half widening) or gemm_w32 from gemm.metal, or with tensor their twins of
// gemm_tensor.metal; grouped: the MoE experts' forms. The grouped tiles are 32 rows (the tile
// table of moe_slot_plan); the dense tensor-op tile is 64 x 64.
func gemmKernel(dt op.DType, grouped, tensor bool) gemmTile {
	g := gemmTile{fn: "gemm_w16", bm: 32, bn: 32}
	if dt == op.F32 {
		g.fn = "gemm_w32"
	}
	suffix := "_bm32_bn32_bk16"
	if tensor {
		g.fn = strings.Replace(g.fn, "gemm_", "gemm_tensor_", 1)
		g.bn, suffix = 64, "_bm64_bn64"
		if !grouped {
			g.bm = 64
		} else {
			suffix = "_bm32_bn64"
		}
	}
	if grouped {
		g.fn += "_grouped"
	}
	if dt == op.F32 {
		g.variant = g.fn + suffix
	} else {
		g.variant = fmt.Sprintf("%s_%s%s", g.fn, dt, suffix)
	}
	g.consts = []mtlConst{boolConst(0, dt == op.BF16)}
	return g
}

// file is the kernel file of the GEMM.
func (g gemmTile) file() string {
	if strings.HasPrefix(g.fn, "gemm_tensor_") {
		return "gemm_tensor.metal"
	}
	return "gemm.metal"
}

// gemmTensor reports whether the Pass runs the tensor-op GEMMs (op "gemm").
func (j *Pass) gemmTensor() bool { return j.kernel("gemm", gemmSimdKernel) == gemmTensorKernel }

// encodeMatMul encodes y [T, N] = x [T, K] W^T into j (tensors already on the device): a QAffine
// W through the quantized kernels of quant.go, an FP8Block or QFloat one through those of
// fpquant.go, a GGML one through those of ggml.go, a dense one through gemm_w16 / gemm_w32 or their tensor-op twins (op "gemm").
func (b *Backend) encodeMatMul(j *Pass, y, x *Tensor, T int, w *op.Matrix) error {
	if w.DType == op.QAffine {
		return b.encodeQMatMul(j, y, x, T, w)
	}
	if isFloatFormat(w) {
		return b.encodeFPMatMul(j, y, x, T, w)
	}
	if w.DType == op.GGML {
		return b.encodeGGMatMul(j, y, x, T, w)
	}
	g := gemmKernel(w.DType, false, j.gemmTensor())
	pipe, err := b.pipeline(g.file(), g.fn, g.consts)
	if err != nil {
		return j.fail(err)
	}
	j.dispatch(pipe, g.variant, [3]int{(w.N + g.bn - 1) / g.bn, (T + g.bm - 1) / g.bm, 1}, [3]int{128, 1, 1}, 0,
		y, x, j.weight(w), paramBytes(gemmParams{Rows: T, N: w.N, K: w.K}))
	return j.err
}

// MatMul implements op.Pass with gemm_w16 / gemm_w32: y [T, N] = x [T, K] W^T for W [N, K] in
// BF16 or F16 (function constant 0 selects the widening, exact either way) or F32, float32
// accumulation on 8x8 simdgroup matrices in tiles of 32 x 32, K in steps of 16. Agreement with
// the CPU op: a few float32 ulps of sum |x||w| per element (different summation order). Variant
// names: gemm_w16_BF16_bm32_bn32_bk16, gemm_w32_bm32_bn32_bk16; with the tensor-op kernels (op
// "gemm": the default on M5 once its self-check passed, else Prefer("gemm", "gemm_tensor"))
// gemm_tensor_w16_BF16_bm64_bn64, bitwise equal to gemm_w16 on the emulator. A QAffine W runs
// the quantized kernels of op "qmm" (quant.go: qmv_affine for T <= 4, else qmm_affine, which
// gives gemm_w32's bits on the dequantized weight), reading the packed codes, scales and biases;
// FP8Block and QFloat weights the kernels of op "qmm_fp" (fpquant.go: qmv_fp, qmm_fp), reading
// the packed codes and scales; GGML weights those of op "qmm_gg" (ggml.go: qmv_gg, qmm_gg),
// reading the blocks as the GGUF file stores them.
func (j *Pass) MatMul(a op.MatMul) error {
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	y, x := j.dev("y", a.Y), j.dev("x", a.X)
	if j.err != nil || a.T == 0 {
		return j.err
	}
	return j.b.encodeMatMul(j, y, x, a.T, a.W)
}

// MoEExperts implements op.Pass: slots grouped by expert (expert order, then token order, exactly
// the rows the CPU op produces) on the device (moe_slot_count, moe_slot_plan, moe_slot_scatter,
// moe_slot_gather), then per expert h = silu(x Wg^T) * (x Wu^T), out = h Wd^T, as two grouped
// GEMMs (gemm_w16_grouped / gemm_w32_grouped) with swiglu between them. Rows of ye past the
// used ones are left as they were (the combine reads only the rows rk names). The expert indices
// are not range-checked here (they come from TopKRoute on the device; the kernels treat indices
// outside [0, E) as empty slots). The gate_up matrices of all experts (or their gate and up
// matrices, stored apart: op.Experts.Up, stacked per expert at upload) must share one storage
// format, and so must the down matrices (each grouped GEMM reads one stack: one dtype, and for
// QAffine one bit width, group size and scale dtype, for FP8Block one scale dtype, for QFloat one
// mode, for GGML one ggml type); mixed ones are ErrUnsupported. QAffine stacks run the grouped kernels of op "qmm"
// (qmv_affine_grouped for T <= 4, else qmm_affine_grouped) over the same tile table, FP8Block
// and QFloat stacks those of op "qmm_fp" (qmv_fp_grouped, qmm_fp_grouped), GGML stacks (one
// ggml type) those of op "qmm_gg" (qmv_gg_grouped, qmm_gg_grouped); FP8Block gate and up
// projections stored apart run as two grouped GEMMs (splitFormats).
func (j *Pass) MoEExperts(a op.MoEExperts) error {
	const opName = "MoEExperts"
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	ex := a.Ex
	for e := 0; e < ex.E; e++ {
		if g, d := ex.GateUp[e], ex.Down[e]; !sameFormat(g, ex.GateUp[0]) || !sameFormat(d, ex.Down[0]) {
			return j.unsupported(opName, "expert %d has %s gate_up and %s down weights, expert 0 %s and %s (each grouped GEMM takes one format over the experts)",
				e, weightFormat(g), weightFormat(d), weightFormat(ex.GateUp[0]), weightFormat(ex.Down[0]))
		}
		if ex.Split() && !sameFormat(ex.Up[e], ex.Up[0]) {
			return j.unsupported(opName, "expert %d has %s up weights, expert 0 %s (the grouped GEMM takes one format over the experts)",
				e, weightFormat(ex.Up[e]), weightFormat(ex.Up[0]))
		}
	}
	if err := guard32(opName, a.T*a.K*ex.D, a.T*a.K*2*ex.I, ex.E*2*ex.I*ex.D); err != nil {
		return j.fail(err)
	}
	ye, rk, x, idx := j.dev("ye", a.YE), j.dev("rk", a.RK), j.dev("x", a.X), j.dev("idx", a.Idx)
	if j.err != nil || a.T == 0 {
		return j.err
	}
	return j.moeExperts(ye, rk, x, a.T, idx, a.K, ex)
}

func (j *Pass) moeExperts(ye, rk, x *Tensor, T int, idx *Tensor, K int, ex *op.Experts) error {
	D, I, E := ex.D, ex.I, ex.E
	es, err := j.w.experts(ex)
	if err != nil {
		return j.fail(err)
	}
	swiglu := "swiglu"
	if es.split {
		swiglu = "swiglu_split"
	}
	pswiglu, err := j.b.pipeline("gemm.metal", swiglu, []mtlConst{boolConst(0, true)})
	if err != nil {
		return j.fail(err)
	}
	rows := T * K
	xg, tiles, ntiles := j.moeSlots(rk, x, idx, T, K, E, D)
	if j.err != nil {
		return j.err
	}
	gu, h := j.tmp("moe gate_up", rows*2*I), j.tmp("moe h", rows*I)
	if es.split {
		// Gate and up in different formats: one grouped GEMM each, into the two halves of the
		// gate_up scratch ([rows, I] each).
		g, u := gu.sub(0, rows*I), gu.sub(rows*I, 2*rows*I)
		j.groupedGEMM(g, xg, ex.GateUp[0], es.gu, tiles, T, rows, ntiles)
		j.groupedGEMM(u, xg, ex.Up[0], es.up, tiles, T, rows, ntiles)
		nt := fitWidth(pswiglu, 256)
		j.dispatch(pswiglu, "swiglu_split_f32", [3]int{(rows*I + nt - 1) / nt, 1, 1}, [3]int{nt, 1, 1}, 0,
			h, g, u, paramBytes(swigluParams{Rows: rows, I: I}))
	} else {
		guShape := ex.GateUp[0]
		if ex.Split() { // the stack holds [2I, D] per expert (Weights.experts): the gate_up shape
			s := *guShape
			s.N = 2 * I
			guShape = &s
		}
		j.groupedGEMM(gu, xg, guShape, es.gu, tiles, T, rows, ntiles)
		nt := fitWidth(pswiglu, 256)
		j.dispatch(pswiglu, "swiglu_f32", [3]int{(rows*I + nt - 1) / nt, 1, 1}, [3]int{nt, 1, 1}, 0,
			h, gu, paramBytes(swigluParams{Rows: rows, I: I}))
	}
	j.groupedGEMM(ye, h, ex.Down[0], es.dn, tiles, T, rows, ntiles)
	return j.err
}

// groupedGEMM encodes y [rows, N] = the expert-sorted rows of x [rows, K] times their expert's
// W^T over the tile table, for the stack s of experts shaped and stored like m: gemm_w16_grouped
// / gemm_w32_grouped (or their tensor-op twins, op "gemm"), or the quantized grouped kernels
// (T tokens routed).
func (j *Pass) groupedGEMM(y, x *Tensor, m *op.Matrix, s stack, tiles *Tensor, T, rows, ntiles int) {
	if j.err != nil {
		return
	}
	if s.q != nil {
		j.encodeQGrouped(y, x, m, s.q, tiles, T, rows, ntiles)
		return
	}
	if s.fp != nil {
		j.encodeFPGrouped(y, x, m, s.fp, tiles, T, rows, ntiles)
		return
	}
	if s.gg != nil {
		j.encodeGGGrouped(y, x, m, s.gg, tiles, T, rows, ntiles)
		return
	}
	g := gemmKernel(m.DType, true, j.gemmTensor())
	pipe, err := j.b.pipeline(g.file(), g.fn, g.consts)
	if err != nil {
		j.fail(err)
		return
	}
	j.dispatch(pipe, g.variant, [3]int{(m.N + g.bn - 1) / g.bn, ntiles, 1}, [3]int{128, 1, 1}, 0,
		y, x, s.dense, tiles, paramBytes(gemmParams{Rows: rows, N: m.N, K: m.K}))
}
