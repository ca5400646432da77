package metal

import (
	"fmt"
	"unsafe"

	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
)

// Host side of fpquant.metal and fpquant_tensor.metal: the GEMMs and gathers that read weights
// stored as 8-bit and 4-bit floats (op.FP8Block, op.QFloat; op/weights_fp.go) in their packed
// form. MatMul (and so the GEMMs of GRRead and PLEApply), MoEExperts, Embed and PLEApply's table
// gather dispatch them for those dtypes; each format (FP8Block with BF16 or F32 scales, mxfp4,
// nvfp4, mxfp8) is a specialisation of the same kernels by function constant 3.
//
// Kernels of op "qmm_fp" (Backend.Prefer("qmm_fp", kernel)), each with a grouped form over the
// MoE experts' tile table, as op "qmm"'s for QAffine weights (quant.go) and with their tiles and
// summation order:
//   - qmm_fp (the default for more than 4 rows per weight): gives gemm_w32's bits on the decoded
//     float32 weight;
//   - qmv_fp (the default for up to 4 rows): another summation order, agreeing to float32
//     rounding;
//   - qmm_fp_tensor: qmm_fp's products as Metal 4 tensor ops (bitwise equal to qmm_fp on the
//     emulator).
// Variant names: qmm_fp_fp8_BF16_bm32_bn32_bk32, qmv_fp_grouped_mxfp4_bm4_bn8_bk256,
// qgather_fp_nvfp4_rep4_tg128.

// Kernels of op "qmm_fp".
const (
	qmmFPKernel       = "qmm_fp"
	qmvFPKernel       = "qmv_fp"
	qmmFPTensorKernel = "qmm_fp_tensor"
)

// fpFormats are the values of fpquant.metal's function constant fp_format, by tag.
var fpFormats = []string{"fp8_BF16", "fp8_F32", "mxfp4", "nvfp4", "mxfp8"}

// fpFormat is the fp_format constant of an FP8Block or QFloat weight (an index of fpFormats).
func fpFormat(m *op.Matrix) int {
	switch {
	case m.DType == op.FP8Block && m.FP8.ScaleDType == op.F32:
		return 1
	case m.DType == op.FP8Block:
		return 0
	case m.QF.Mode == op.MXFP4:
		return 2
	case m.QF.Mode == op.NVFP4:
		return 3
	}
	return 4
}

// fpTag names the format in variant names: fp8_BF16, fp8_F32, mxfp4, nvfp4, mxfp8.
func fpTag(m *op.Matrix) string { return fpFormats[fpFormat(m)] }

// isFloatFormat reports whether m is read by the kernels of this file.
func isFloatFormat(m *op.Matrix) bool { return m.DType == op.FP8Block || m.DType == op.QFloat }

// fpConsts are the function constants of fpquant.metal for m's format.
func fpConsts(m *op.Matrix) []mtlConst { return []mtlConst{intConst(3, fpFormat(m))} }

// fpweight is one float-format weight, or E of them stacked per expert, on the device in its
// packed form: the codes and the scales, each in its own buffer.
type fpweight struct {
	codes, scales mtl.Buffer
}

func (f *fpweight) release() {
	if f == nil {
		return
	}
	for _, b := range []mtl.Buffer{f.codes, f.scales} {
		if b != nil {
			b.Release()
		}
	}
}

// fpBytes returns the bytes of m's codes and of its scales, as stored (views of m's slices).
func fpBytes(m *op.Matrix) (codes, scales []byte) {
	asBytes := func(p unsafe.Pointer, n int) []byte {
		if n == 0 {
			return nil
		}
		return unsafe.Slice((*byte)(p), n)
	}
	if m.DType == op.FP8Block {
		f := m.FP8
		if f.ScaleDType == op.F32 {
			return f.Codes, asBytes(unsafe.Pointer(unsafe.SliceData(f.ScalesF32)), 4*len(f.ScalesF32))
		}
		return f.Codes, asBytes(unsafe.Pointer(unsafe.SliceData(f.Scales)), 2*len(f.Scales))
	}
	q := m.QF
	return asBytes(unsafe.Pointer(unsafe.SliceData(q.Codes)), 4*len(q.Codes)), q.Scales
}

// uploadFP stacks float-format matrices of one shape and format into one packed pair from alloc
// (bytes): expert e's codes follow expert e-1's, likewise its scales (fp_expert's layout).
func uploadFP(ms []*op.Matrix, alloc func(int) (mtl.Buffer, error)) (*fpweight, error) {
	c0, s0 := fpBytes(ms[0])
	f := &fpweight{}
	var err error
	if f.codes, err = alloc(len(ms) * len(c0)); err != nil {
		return nil, err
	}
	if f.scales, err = alloc(len(ms) * len(s0)); err != nil {
		f.release()
		return nil, err
	}
	for e, m := range ms {
		c, s := fpBytes(m)
		copy(f.codes.Contents()[e*len(c0):], c)
		copy(f.scales.Contents()[e*len(s0):], s)
	}
	return f, nil
}

// fpmatrix returns a float-format m on the device, packed (uploaded on first use).
func (w *Weights) fpmatrix(m *op.Matrix) (*fpweight, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f, ok := w.fmats[m]; ok {
		return f, nil
	}
	f, err := uploadFP([]*op.Matrix{m}, w.newBuf)
	if err != nil {
		return nil, err
	}
	w.fmats[m] = f
	return f, nil
}

// fpweight returns a float-format weight from the Pass's Weights, recording an upload error.
func (j *Pass) fpweight(m *op.Matrix) *fpweight {
	if j.err != nil {
		return nil
	}
	f, err := j.w.fpmatrix(m)
	if err != nil {
		j.fail(err)
		return nil
	}
	return f
}

// encodeFPMatMul encodes y [T, N] = x [T, K] W^T for a float-format W (tensors on the device).
func (b *Backend) encodeFPMatMul(j *Pass, y, x *Tensor, T int, w *op.Matrix) error {
	p, pipe, err := b.qmmPipeline(floatKernels, fpConsts(w), fpTag(w), w.N, T, T, 0, false)
	if err != nil {
		return j.fail(err)
	}
	f := j.fpweight(w)
	if f == nil {
		return j.err
	}
	j.dispatch(pipe, p.variant, p.groups, p.threads, 0, y, x, f.codes, f.scales,
		paramBytes(gemmParams{Rows: T, N: w.N, K: w.K}))
	return j.err
}

// encodeFPGrouped encodes the grouped GEMM of the stacked float-format experts f (format of m,
// each expert [N, K]) over the tile table: y [rows, N] from x [rows, K], T tokens routed.
func (j *Pass) encodeFPGrouped(y, x *Tensor, m *op.Matrix, f *fpweight, tiles *Tensor, T, rows, ntiles int) {
	if j.err != nil {
		return
	}
	p, pipe, err := j.b.qmmPipeline(floatKernels, fpConsts(m), fpTag(m), m.N, T, rows, ntiles, true)
	if err != nil {
		j.fail(err)
		return
	}
	j.dispatch(pipe, p.variant, p.groups, p.threads, 0, y, x, f.codes, f.scales, tiles,
		paramBytes(gemmParams{Rows: rows, N: m.N, K: m.K}))
}

// fpgather encodes qgather_fp: out[(r*rep + s)*K : ...+K] = the decoded row ids[r] of the
// float-format table m [V, K] whose packed data f holds on the device (j.fpweight(m), or a copy
// the Pass owns), for r < rows and s < rep. The ids must be in [0, V) (checked on the host by
// the op).
func (j *Pass) fpgather(out, ids *Tensor, rows, rep int, m *op.Matrix, f *fpweight) error {
	if rows == 0 || f == nil {
		return j.err
	}
	if err := guard32("qgather_fp", rows*rep*m.K, m.N*m.K); err != nil {
		return j.fail(err)
	}
	pipe, err := j.b.pipeline("fpquant.metal", "qgather_fp", fpConsts(m))
	if err != nil {
		return j.fail(err)
	}
	nt := fitWidth(pipe, elemThreads(m.K))
	j.dispatch(pipe, fmt.Sprintf("qgather_fp_%s_rep%d_tg%d", fpTag(m), rep, nt), [3]int{(m.K + nt - 1) / nt, rows, 1},
		[3]int{nt, 1, 1}, 0, out, f.codes, f.scales, ids, paramBytes(qGatherParams{Rows: rows, Rep: rep, K: m.K}))
	return j.err
}
