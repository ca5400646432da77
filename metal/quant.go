package metal

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
)

// Host side of quant.metal and quant_tensor.metal: the GEMMs and gathers that read MLX
// affine-quantized weights (op.QAffine, docs/FORMATS.md section 2) in their packed form. MatMul (and
// so the GEMMs of GRRead and PLEApply), MoEExperts, Embed and PLEApply's table gather dispatch
// them when a weight is QAffine; every bit width of op.QuantBits, group size of op.QuantGroups and
// scale dtype (BF16, F16) is a specialisation of the same kernels by function constants.
//
// Kernels of op "qmm" (Backend.Prefer("qmm", kernel)), each with a grouped form over the MoE
// experts' tile table:
//   - qmm_affine (the default for more than 4 rows per weight): 32 x 32 tiles, the W tile
//     dequantized into threadgroup memory per K step of 32, 8x8 simdgroup matrices; it gives
//     gemm_w32's bits on the dequantized float32 weight;
//   - qmv_affine (the default for up to 4 rows: one-token and decode shapes): no threadgroup
//     memory, 8 output columns per threadgroup, lanes over K, simd_sum; another summation order,
//     so it agrees with qmm_affine to float32 rounding of sum |x||w|, not bitwise;
//   - qmm_affine_tensor: qmm_affine with the products of each K step as one Metal 4
//     mpp::tensor_ops::matmul2d into a cooperative tensor (M5-class GPUs; needs Metal 4). Same
//     operands as qmm_affine; bitwise equal to it where matmul2d sums k in ascending order with
//     fused multiply-adds (the emulator does; Apple does not document the order).
// Variant names say the format and the tiles, MLX style: qmm_affine_b4_g64_BF16_bm32_bn32_bk32,
// qmm_affine_tensor_grouped_b3_g32_F16_bm32_bn32_bk32, qmv_affine_b8_g128_BF16_bm4_bn8_bk256,
// qgather_affine_b4_g64_BF16_rep4_tg256.

// qweight is one QAffine weight, or E of them stacked per expert, on the device in its packed
// form: the code words, the scales and the biases, each in its own buffer (so that a read past
// one of them is caught by the emulator's AddressSanitizer build).
type qweight struct {
	codes, scales, biases mtl.Buffer
}

func (q *qweight) release() {
	if q == nil {
		return
	}
	for _, b := range []mtl.Buffer{q.codes, q.scales, q.biases} {
		if b != nil {
			b.Release()
		}
	}
}

// uploadQuant stacks QAffine matrices of one shape and format into one packed triple from alloc
// (bytes): expert e's codes follow expert e-1's, likewise its scales and biases.
func uploadQuant(ms []*op.Matrix, alloc func(int) (mtl.Buffer, error)) (*qweight, error) {
	nw, ng := len(ms[0].Q.Codes), len(ms[0].Q.Scales)
	q := &qweight{}
	var err error
	if q.codes, err = alloc(4 * len(ms) * nw); err != nil {
		return nil, err
	}
	if q.scales, err = alloc(2 * len(ms) * ng); err != nil {
		q.release()
		return nil, err
	}
	if q.biases, err = alloc(2 * len(ms) * ng); err != nil {
		q.release()
		return nil, err
	}
	for e, m := range ms {
		copyU32(q.codes, 4*e*nw, m.Q.Codes)
		copyU16(q.scales, 2*e*ng, m.Q.Scales)
		copyU16(q.biases, 2*e*ng, m.Q.Biases)
	}
	return q, nil
}

func copyU32(buf mtl.Buffer, off int, x []uint32) {
	if len(x) > 0 {
		copy(unsafe.Slice((*uint32)(unsafe.Pointer(&buf.Contents()[off])), len(x)), x)
	}
}

// qmatrix returns a QAffine m on the device, packed (uploaded on first use).
func (w *Weights) qmatrix(m *op.Matrix) (*qweight, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q, ok := w.qmats[m]; ok {
		return q, nil
	}
	q, err := uploadQuant([]*op.Matrix{m}, w.newBuf)
	if err != nil {
		return nil, err
	}
	w.qmats[m] = q
	return q, nil
}

// qweight returns a QAffine weight from the Pass's Weights, recording an upload error.
func (j *Pass) qweight(m *op.Matrix) *qweight {
	if j.err != nil {
		return nil
	}
	q, err := j.w.qmatrix(m)
	if err != nil {
		j.fail(err)
		return nil
	}
	return q
}

// quantConsts are the function constants of quant.metal for q's format: 0 scales in bfloat16
// (else half), 1 bits, 2 group size.
func quantConsts(q *op.Quant) []mtlConst {
	return []mtlConst{boolConst(0, q.ScaleDType == op.BF16), intConst(1, q.Bits), intConst(2, q.Group)}
}

// quantTag names q's format in variant names: b4_g64_BF16.
func quantTag(q *op.Quant) string { return fmt.Sprintf("b%d_g%d_%s", q.Bits, q.Group, q.ScaleDType) }

// weightFormat names a weight's storage for error messages: BF16, QAffine b4 g64 BF16,
// FP8Block fp8_BF16, QFloat mxfp4 or GGML Q4_K.
func weightFormat(m *op.Matrix) string {
	switch m.DType {
	case op.QAffine:
		return fmt.Sprintf("QAffine b%d g%d %s", m.Q.Bits, m.Q.Group, m.Q.ScaleDType)
	case op.FP8Block, op.QFloat:
		return m.DType.String() + " " + fpTag(m)
	case op.GGML:
		return m.DType.String() + " " + ggTag(m)
	}
	return m.DType.String()
}

// sameFormat reports whether two weights have one storage format (dtype, and for QAffine the
// bits, group size and scale dtype, for FP8Block the scale dtype, for QFloat the mode, for GGML
// the ggml type): what one stacked grouped GEMM reads.
func sameFormat(a, b *op.Matrix) bool {
	if a.DType != b.DType {
		return false
	}
	switch a.DType {
	case op.QAffine:
		return a.Q.Bits == b.Q.Bits && a.Q.Group == b.Q.Group && a.Q.ScaleDType == b.Q.ScaleDType
	case op.FP8Block, op.QFloat:
		return fpFormat(a) == fpFormat(b)
	case op.GGML:
		return a.GG.Type == b.GG.Type
	}
	return true
}

// Kernels of op "qmm".
const (
	qmmKernel       = "qmm_affine"
	qmmTensorKernel = "qmm_affine_tensor"
	qmvKernel       = "qmv_affine"
)

// qmvMaxRows is the most rows per weight for which qmv_affine is the default (QMV_ROWS of
// quant.metal: one pass of rows per threadgroup).
const qmvMaxRows = 4

// qmmFamily is the GEMM kernels of one family of packed weights: the op Prefer names them by,
// the tiled, few-row and tensor-op kernels (each with a _grouped form), and their files.
type qmmFamily struct {
	op, mm, mv, tensor string
	file, tensorFile   string
}

// affineKernels are op "qmm"'s, for QAffine weights (this file); floatKernels op "qmm_fp"'s, for
// FP8Block and QFloat weights (fpquant.go); ggmlKernels (ggml.go) op "qmm_gg"'s, for GGML ones.
var (
	affineKernels = qmmFamily{"qmm", qmmKernel, qmvKernel, qmmTensorKernel, "quant.metal", "quant_tensor.metal"}
	floatKernels  = qmmFamily{"qmm_fp", qmmFPKernel, qmvFPKernel, qmmFPTensorKernel, "fpquant.metal", "fpquant_tensor.metal"}
)

// qmmPlan is one quantized GEMM dispatch: kernel file and function, variant name and geometry.
type qmmPlan struct {
	file, fn, variant string
	groups, threads   [3]int
}

// planQMM picks the kernel of family f (Prefer of f.op, else f.mv for at most qmvMaxRows rows
// per weight, else f.mm) for an [N, K] weight of the format named tag and lays out its grid:
// rows rows for one weight, or ntiles entries of the experts' tile table when grouped.
func (b *Backend) planQMM(f qmmFamily, tag string, N, rowsPerWeight, rows, ntiles int, grouped bool) qmmPlan {
	def := f.mm
	if rowsPerWeight <= qmvMaxRows {
		def = f.mv
	}
	return b.layoutQMM(f, b.preferred(f.op, def), tag, N, rows, ntiles, grouped)
}

// layoutQMM is the plan of kernel k of family f (see planQMM).
func (b *Backend) layoutQMM(f qmmFamily, k, tag string, N, rows, ntiles int, grouped bool) qmmPlan {
	p := qmmPlan{file: f.file, fn: k}
	if k == f.tensor {
		p.file = f.tensorFile
	}
	if grouped {
		p.fn += "_grouped"
	}
	gy := ntiles
	if k == f.mv {
		p.variant = fmt.Sprintf("%s_%s_bm%d_bn8_bk256", p.fn, tag, qmvMaxRows)
		if !grouped {
			gy = (rows + qmvMaxRows - 1) / qmvMaxRows
		}
		p.groups, p.threads = [3]int{(N + 7) / 8, gy, 1}, [3]int{64, 1, 1}
		return p
	}
	p.variant = fmt.Sprintf("%s_%s_bm32_bn32_bk32", p.fn, tag)
	if !grouped {
		gy = (rows + 31) / 32
	}
	p.groups, p.threads = [3]int{(N + 31) / 32, gy, 1}, [3]int{128, 1, 1}
	return p
}

// qmmPipeline plans a quantized GEMM (planQMM) and builds its pipeline. Where the plan's tiled
// kernel (qmm_affine, qmm_fp or their tensor-op forms: 128 threads, four simdgroups' tiles)
// needs more threads than its pipeline allows (Apple's compiler lowers a pipeline's
// maxTotalThreadsPerThreadgroup for register-heavy kernels), the family's matrix-vector kernel
// (qmv_affine, qmv_fp: 64 threads, every shape) runs instead, and the backend logs it once per
// kernel.
func (b *Backend) qmmPipeline(f qmmFamily, consts []mtlConst, tag string, N, rowsPerWeight, rows, ntiles int, grouped bool) (qmmPlan, mtlPipeline, error) {
	p := b.planQMM(f, tag, N, rowsPerWeight, rows, ntiles, grouped)
	pipe, err := b.pipeline(p.file, p.fn, consts)
	if err != nil {
		return p, nil, err
	}
	limit := pipe.MaxTotalThreadsPerThreadgroup()
	if p.threads[0] <= limit || strings.HasPrefix(p.fn, f.mv) {
		return p, pipe, nil
	}
	fb := b.layoutQMM(f, f.mv, tag, N, rows, ntiles, grouped)
	fpipe, err := b.pipeline(fb.file, fb.fn, consts)
	if err != nil {
		return p, nil, err
	}
	b.mu.Lock()
	first := !b.fellBack[p.fn]
	b.fellBack[p.fn] = true
	b.mu.Unlock()
	if first {
		b.logf("metal: %s needs %d threads per threadgroup, its pipeline allows %d on %s: %s runs instead", p.fn, p.threads[0], limit, b.dev.Name(), fb.fn)
	}
	return fb, fpipe, nil
}

// encodeQMatMul encodes y [T, N] = x [T, K] W^T for a QAffine W (tensors on the device).
func (b *Backend) encodeQMatMul(j *Pass, y, x *Tensor, T int, w *op.Matrix) error {
	p, pipe, err := b.qmmPipeline(affineKernels, quantConsts(w.Q), quantTag(w.Q), w.N, T, T, 0, false)
	if err != nil {
		return j.fail(err)
	}
	q := j.qweight(w)
	if q == nil {
		return j.err
	}
	j.dispatch(pipe, p.variant, p.groups, p.threads, 0, y, x, q.codes, q.scales, q.biases,
		paramBytes(gemmParams{Rows: T, N: w.N, K: w.K}))
	return j.err
}

// encodeQGrouped encodes the grouped GEMM of the stacked QAffine experts q (format of m, each
// expert [N, K]) over the tile table: y [rows, N] from x [rows, K], T tokens routed.
func (j *Pass) encodeQGrouped(y, x *Tensor, m *op.Matrix, q *qweight, tiles *Tensor, T, rows, ntiles int) {
	if j.err != nil {
		return
	}
	p, pipe, err := j.b.qmmPipeline(affineKernels, quantConsts(m.Q), quantTag(m.Q), m.N, T, rows, ntiles, true)
	if err != nil {
		j.fail(err)
		return
	}
	j.dispatch(pipe, p.variant, p.groups, p.threads, 0, y, x, q.codes, q.scales, q.biases, tiles,
		paramBytes(gemmParams{Rows: rows, N: m.N, K: m.K}))
}

// qgather encodes qgather_affine: out[(r*rep + s)*K : ...+K] = the dequantized row ids[r] of
// the QAffine table m [V, K] whose packed data q holds on the device (j.qweight(m), or a copy the
// Pass owns), for r < rows and s < rep. The ids must be in [0, V) (checked on the host by the
// op).
func (j *Pass) qgather(out, ids *Tensor, rows, rep int, m *op.Matrix, q *qweight) error {
	if rows == 0 || q == nil {
		return j.err
	}
	if err := guard32("qgather", rows*rep*m.K, m.N*m.K*m.Q.Bits/32); err != nil {
		return j.fail(err)
	}
	pipe, err := j.b.pipeline("quant.metal", "qgather_affine", quantConsts(m.Q))
	if err != nil {
		return j.fail(err)
	}
	nt := fitWidth(pipe, elemThreads(m.K))
	j.dispatch(pipe, fmt.Sprintf("qgather_affine_%s_rep%d_tg%d", quantTag(m.Q), rep, nt), [3]int{(m.K + nt - 1) / nt, rows, 1},
		[3]int{nt, 1, 1}, 0, out, q.codes, q.scales, q.biases, ids, paramBytes(qGatherParams{Rows: rows, Rep: rep, K: m.K}))
	return j.err
}
