package metal

import (
	"fmt"

	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
)

// Host side of ggml.metal and ggml_tensor.metal: the GEMMs and gathers that read weights in
// ggml's block-quantized types (op.GGML: op.GGMLBlocks, the GGUF file's blocks as stored;
// op.GGMLBlockTypes) in that form, uploaded as raw bytes. MatMul (and so the GEMMs of GRRead,
// GRWrite and PLEApply), MoEExperts, Embed and PLEApply's table gather dispatch them for GGML
// weights; each type is a specialisation of the same kernels by function constant 3 (the ggml
// type id).
//
// Kernels of op "qmm_gg" (Backend.Prefer("qmm_gg", kernel)), each with a grouped form over the
// MoE experts' tile table, as op "qmm"'s for QAffine weights (quant.go) and with their tiles and
// summation order:
//   - qmm_gg (the default for more than 4 rows per weight): gives gemm_w32's bits on the decoded
//     float32 weight;
//   - qmv_gg (the default for up to 4 rows): another summation order, agreeing to float32
//     rounding;
//   - qmm_gg_tensor: qmm_gg's products as Metal 4 tensor ops (bitwise equal to qmm_gg on the
//     emulator).
// Variant names: qmm_gg_Q4_K_bm32_bn32_bk32, qmv_gg_grouped_Q8_0_bm4_bn8_bk256,
// qgather_gg_IQ4_XS_rep4_tg64.

// Kernels of op "qmm_gg".
const (
	qmmGGKernel       = "qmm_gg"
	qmvGGKernel       = "qmv_gg"
	qmmGGTensorKernel = "qmm_gg_tensor"
)

// ggmlKernels are op "qmm_gg"'s kernels and files.
var ggmlKernels = qmmFamily{"qmm_gg", qmmGGKernel, qmvGGKernel, qmmGGTensorKernel, "ggml.metal", "ggml_tensor.metal"}

// ggTag names a GGML weight's type in variant names: ggml's name (Q4_K, IQ4_XS).
func ggTag(m *op.Matrix) string { return m.GG.Type.String() }

// ggConsts are the function constants of ggml.metal for m's type: 3 gg_type, the ggml type id.
func ggConsts(m *op.Matrix) []mtlConst { return []mtlConst{intConst(3, int(m.GG.Type))} }

// ggweight is one GGML weight, or E of them stacked per expert, on the device: the rows of
// blocks as the file stores them, expert e's after expert e-1's.
type ggweight struct {
	data mtl.Buffer
}

func (g *ggweight) release() {
	if g != nil && g.data != nil {
		g.data.Release()
	}
}

// uploadGG stacks GGML matrices of one shape and type into one buffer from alloc (bytes):
// expert e's blocks after expert e-1's (gg_expert's layout).
func uploadGG(ms []*op.Matrix, alloc func(int) (mtl.Buffer, error)) (*ggweight, error) {
	n := len(ms[0].GG.Data)
	buf, err := alloc(len(ms) * n)
	if err != nil {
		return nil, err
	}
	for e, m := range ms {
		copy(buf.Contents()[e*n:], m.GG.Data)
	}
	return &ggweight{data: buf}, nil
}

// ggmatrix returns a GGML m on the device (uploaded on first use).
func (w *Weights) ggmatrix(m *op.Matrix) (*ggweight, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g, ok := w.ggmats[m]; ok {
		return g, nil
	}
	g, err := uploadGG([]*op.Matrix{m}, w.newBuf)
	if err != nil {
		return nil, err
	}
	w.ggmats[m] = g
	return g, nil
}

// ggweight returns a GGML weight from the Pass's Weights, recording an upload error.
func (j *Pass) ggweight(m *op.Matrix) *ggweight {
	if j.err != nil {
		return nil
	}
	g, err := j.w.ggmatrix(m)
	if err != nil {
		j.fail(err)
		return nil
	}
	return g
}

// encodeGGMatMul encodes y [T, N] = x [T, K] W^T for a GGML W (tensors on the device).
func (b *Backend) encodeGGMatMul(j *Pass, y, x *Tensor, T int, w *op.Matrix) error {
	p := b.planQMM(ggmlKernels, ggTag(w), w.N, T, T, 0, false)
	pipe, err := b.pipeline(p.file, p.fn, ggConsts(w))
	if err != nil {
		return j.fail(err)
	}
	g := j.ggweight(w)
	if g == nil {
		return j.err
	}
	j.dispatch(pipe, p.variant, p.groups, p.threads, 0, y, x, g.data, paramBytes(gemmParams{Rows: T, N: w.N, K: w.K}))
	return j.err
}

// encodeGGGrouped encodes the grouped GEMM of the stacked GGML experts g (type of m, each
// expert [N, K]) over the tile table: y [rows, N] from x [rows, K], T tokens routed.
func (j *Pass) encodeGGGrouped(y, x *Tensor, m *op.Matrix, g *ggweight, tiles *Tensor, T, rows, ntiles int) {
	if j.err != nil {
		return
	}
	p := j.b.planQMM(ggmlKernels, ggTag(m), m.N, T, rows, ntiles, true)
	pipe, err := j.b.pipeline(p.file, p.fn, ggConsts(m))
	if err != nil {
		j.fail(err)
		return
	}
	j.dispatch(pipe, p.variant, p.groups, p.threads, 0, y, x, g.data, tiles,
		paramBytes(gemmParams{Rows: rows, N: m.N, K: m.K}))
}

// gggather encodes qgather_gg: out[(r*rep + s)*K : ...+K] = the decoded row ids[r] of the GGML
// table m [V, K] whose blocks g holds on the device (j.ggweight(m), or a copy the Pass owns),
// for r < rows and s < rep. The ids must be in [0, V) (checked on the host by the op).
func (j *Pass) gggather(out, ids *Tensor, rows, rep int, m *op.Matrix, g *ggweight) error {
	if rows == 0 || g == nil {
		return j.err
	}
	if err := guard32("qgather_gg", rows*rep*m.K, m.N*m.K); err != nil {
		return j.fail(err)
	}
	pipe, err := j.b.pipeline("ggml.metal", "qgather_gg", ggConsts(m))
	if err != nil {
		return j.fail(err)
	}
	nt := elemThreads(m.K / 8)
	j.dispatch(pipe, fmt.Sprintf("qgather_gg_%s_rep%d_tg%d", ggTag(m), rep, nt), [3]int{(m.K/8 + nt - 1) / nt, rows, 1},
		[3]int{nt, 1, 1}, 0, out, g.data, ids, paramBytes(qGatherParams{Rows: rows, Rep: rep, K: m.K}))
	return j.err
}
