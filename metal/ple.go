package metal

import (
	"fmt"
	"math"

	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
)

// Host side of ple.metal (ple_gather, ple_gate, ple_conv, ple_state).

// PLEApply implements op.Pass: the table rows of ids [T, Heads] gathered into emb [T, EmbedDim]
// (ple_gather; qgather_affine for a QAffine table, qgather_fp for an FP8Block or QFloat one,
// qgather_gg for a GGML one),
// key = emb Key^T and value = emb Value^T (gemm_w16/gemm_w32), the gate and the grouped norms
// per token (ple_gate), H += gv + silu(dilated causal conv of gvn) with the carried conv state
// (ple_conv), and the state advanced (ple_state). The hashed ids come from op.PLEHash on the
// host (integer bookkeeping over the token history, not worth a kernel) and are checked on the
// host when the op is encoded (PLEApply.CheckIDs), so they must be written into their tensor
// before. A whole table is uploaded once (Weights) and gathered on the device; a split one
// (PLEApply.Parts, up to ~100 GB of file views) is not uploaded: the stored rows the ids name
// are copied on the host, when the op is encoded, into a table of the Pass (T*Heads rows, in id
// order, in the parts' own format), which the same kernels gather from with the ids 0, 1, ...,
// so the bits are those of the whole table. The rows of FP8Block parts share their scales in
// 128-row blocks, which a table of scattered rows cannot keep: they are decoded on the host
// into a float32 table (fp8Row: e4m3(code) * scale rounded once, the value qgather_fp computes),
// so their bits are those of the whole table too.
// float32 sums (the CPU op sums dots and the conv in float64): agreement about 1e-6 relative.
// Limits: S <= 8, (ConvK-1)*Dilation <= 32.
func (j *Pass) PLEApply(a op.PLEApply) error {
	const opName = "PLEApply"
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	w := a.W
	C, L := w.S*w.D, (w.ConvK()-1)*w.Dilation
	if w.S > 8 || L > 32 {
		return j.unsupported(opName, "S=%d streams, conv state of %d steps (the kernels take S <= 8, at most 32 steps)", w.S, L)
	}
	rows := a.T * w.Heads()
	if w.Table != nil {
		rows = w.Table.N
	}
	if err := guard32(opName, a.T*C, a.T*w.EmbedDim, rows*w.HeadDim); err != nil {
		return j.fail(err)
	}
	H, st, ids := j.dev("H", a.H), j.dev("convState", a.ConvState), j.dev("ids", a.IDs)
	if j.err != nil || a.T == 0 {
		return j.err
	}
	if err := a.CheckIDs(ids.I32()); err != nil {
		return j.fail(err)
	}
	tab := pleTable{m: w.Table}
	switch {
	case a.Parts != nil:
		tab, ids = j.pleRows(a, ids.I32())
	case w.Table.DType == op.QAffine:
		tab.q = j.qweight(w.Table)
	case isFloatFormat(w.Table):
		tab.fp = j.fpweight(w.Table)
	case w.Table.DType == op.GGML:
		tab.gg = j.ggweight(w.Table)
	default:
		tab.dense = j.weight(w.Table)
	}
	if j.err != nil {
		return j.err
	}
	return j.pleApply(H, a.T, ids, tab, w, st, a.Eps)
}

// pleTable is the n-gram table a PLEApply gathers from on the device: m gives its format and
// width, dense (F32, BF16, F16), q (QAffine), fp (FP8Block, QFloat) or gg (GGML) its data.
type pleTable struct {
	m     *op.Matrix
	dense mtl.Buffer
	q     *qweight
	fp    *fpweight
	gg    *ggweight
}

// pleRows copies the stored rows of a split table that ids name, in order, into buffers the
// Pass owns (a compact table of len(ids) rows in the parts' format) and returns it with the ids
// 0..len(ids)-1 that gather it in order.
func (j *Pass) pleRows(a op.PLEApply, ids []int32) (pleTable, *Tensor) {
	n, Hd, first := len(ids), a.W.HeadDim, a.Parts[0]
	local := make([]int32, n)
	for i := range local {
		local[i] = int32(i)
	}
	tab := pleTable{m: &op.Matrix{N: n, K: Hd, DType: first.DType}}
	if first.DType == op.QAffine {
		q := first.Q
		cw, ng := Hd*q.Bits/32, Hd/q.Group
		rows := make([]*op.Matrix, n)
		for i, id := range ids {
			m, r := a.Row(id)
			rows[i] = &op.Matrix{N: 1, K: Hd, DType: op.QAffine, Q: &op.Quant{Bits: q.Bits, Group: q.Group, ScaleDType: q.ScaleDType,
				Codes: m.Q.Codes[r*cw : (r+1)*cw], Scales: m.Q.Scales[r*ng : (r+1)*ng], Biases: m.Q.Biases[r*ng : (r+1)*ng]}}
		}
		var err error
		if tab.q, err = uploadQuant(rows, j.buffer); err != nil {
			j.fail(err)
		}
		tab.m.Q = &op.Quant{Bits: q.Bits, Group: q.Group, ScaleDType: q.ScaleDType}
		return tab, j.i32(local)
	}
	if first.DType == op.QFloat {
		mode := first.QF.Mode
		cw, ng := Hd*mode.Bits()/32, Hd/mode.Group()
		rows := make([]*op.Matrix, n)
		for i, id := range ids {
			m, r := a.Row(id)
			rows[i] = &op.Matrix{N: 1, K: Hd, DType: op.QFloat, QF: &op.QuantFloat{Mode: mode,
				Codes: m.QF.Codes[r*cw : (r+1)*cw], Scales: m.QF.Scales[r*ng : (r+1)*ng]}}
		}
		var err error
		if tab.fp, err = uploadFP(rows, j.buffer); err != nil {
			j.fail(err)
		}
		tab.m.QF = &op.QuantFloat{Mode: mode}
		return tab, j.i32(local)
	}
	if first.DType == op.GGML {
		typ, rb := first.GG.Type, len(first.GG.Data)/first.N // bytes per row (Check validated the parts)
		rows := make([]*op.Matrix, n)
		for i, id := range ids {
			m, r := a.Row(id)
			rows[i] = &op.Matrix{N: 1, K: Hd, DType: op.GGML, GG: &op.GGMLBlocks{Type: typ, Data: m.GG.Data[r*rb : (r+1)*rb]}}
		}
		var err error
		if tab.gg, err = uploadGG(rows, j.buffer); err != nil {
			j.fail(err)
		}
		tab.m.GG = &op.GGMLBlocks{Type: typ}
		return tab, j.i32(local)
	}
	size := 2
	if first.DType == op.F32 || first.DType == op.FP8Block {
		size = 4
		tab.m.DType = op.F32
	}
	buf, err := j.buffer(n * Hd * size)
	if err != nil {
		j.fail(err)
		return tab, nil
	}
	row := make([]float32, Hd)
	for i, id := range ids {
		m, r := a.Row(id)
		switch m.DType {
		case op.FP8Block:
			fp8Row(row, m, r)
			copyF32(buf, i*Hd*4, row)
		case op.F32:
			copyF32(buf, i*Hd*4, m.F32[r*Hd:(r+1)*Hd])
		default:
			copyU16(buf, i*Hd*2, m.U16[r*Hd:(r+1)*Hd])
		}
	}
	tab.dense = buf
	return tab, j.i32(local)
}

// pleApply encodes the PLE layer over the table rows of bids in tab.
func (j *Pass) pleApply(bh *Tensor, T int, bids *Tensor, tab pleTable, w *op.PLEWeights, bst *Tensor, eps float32) error {
	b := j.b
	S, D, E, Hd := w.S, w.D, w.EmbedDim, w.HeadDim
	heads, C, K := E/Hd, S*D, w.ConvK()
	L := (K - 1) * w.Dilation
	var pipes [4]mtlPipeline
	for i, fn := range []string{"ple_gather", "ple_gate", "ple_conv", "ple_state"} {
		p, err := b.pipeline("ple.metal", fn, nil)
		if err != nil {
			return j.fail(err)
		}
		pipes[i] = p
	}
	bemb, bkey, bval := j.tmp("ple emb", T*E), j.tmp("ple key", T*C), j.tmp("ple value", T*D)
	switch {
	case tab.m.DType == op.QAffine:
		// emb [T, heads, Hd] is the table rows of ids [T*heads] in order.
		j.qgather(bemb, bids, T*heads, 1, tab.m, tab.q)
	case isFloatFormat(tab.m):
		j.fpgather(bemb, bids, T*heads, 1, tab.m, tab.fp)
	case tab.m.DType == op.GGML:
		j.gggather(bemb, bids, T*heads, 1, tab.m, tab.gg)
	default:
		dtype := map[op.DType]int{op.F32: 0, op.BF16: 1, op.F16: 2}[tab.m.DType]
		var t16, t32 arg = j.tmp("ple dummy16", 1), j.tmp("ple dummy32", 1)
		if tab.m.DType == op.F32 {
			t32 = tab.dense
		} else {
			t16 = tab.dense
		}
		ne := elemThreads(E)
		j.dispatch(pipes[0], fmt.Sprintf("ple_gather_%s_h%d_hd%d", tab.m.DType, heads, Hd), [3]int{(E + ne - 1) / ne, T, 1}, [3]int{ne, 1, 1}, 0,
			bemb, t16, t32, bids, paramBytes(pleGatherParams{T: T, Heads: heads, Hd: Hd, Dtype: dtype}))
	}
	b.encodeMatMul(j, bkey, bemb, T, w.Key)
	b.encodeMatMul(j, bval, bemb, T, w.Value)
	bgv, bgvn := j.tmp("ple gv", T*C), j.tmp("ple gvn", T*C)
	nt := fitWidth(pipes[1], elemThreads(D))
	j.dispatch(pipes[1], fmt.Sprintf("ple_gate_f32_s%d_tg%d", S, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 0,
		bgv, bgvn, bkey, bval, bh, j.vec(w.NormKey), j.vec(w.NormQuery), j.vec(w.NormConv), paramBytes(normParams{D: D, S: S, Eps: eps}))
	prm := paramBytes(pleConvParams{T: T, C: C, K: K, Dil: w.Dilation})
	j.dispatch(pipes[2], fmt.Sprintf("ple_conv_f32_k%d_dil%d", K, w.Dilation), [3]int{(C + 255) / 256, T, 1}, [3]int{256, 1, 1}, 0,
		bh, bgv, bgvn, bst, j.vec(w.ConvW), prm)
	if L > 0 {
		j.dispatch(pipes[3], fmt.Sprintf("ple_state_f32_steps%d", L), [3]int{(C + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0,
			bst, bgvn, prm)
	}
	return j.err
}

// fp8Row decodes row r of an FP8Block weight m into dst (length m.K): element j is
// e4m3(code) * the scale of block (r/128, j/128), one float32 multiply (op/weights_fp.go).
func fp8Row(dst []float32, m *op.Matrix, r int) {
	f, B := m.FP8, op.FP8BlockSize
	for j, c := range f.Codes[r*m.K : (r+1)*m.K] {
		g := r/B*f.Grid[1] + j/B
		s := f.ScalesF32
		var scale float32
		if f.ScaleDType == op.F32 {
			scale = s[g]
		} else {
			scale = math.Float32frombits(uint32(f.Scales[g]) << 16)
		}
		dst[j] = e4m3(c) * scale
	}
}

// e4m3 is the value of an E4M3 code: (-1)^s 2^(e-7) (1 + m/8), m 2^-9 for e = 0, NaN for
// 0x7f and 0xff (op/weights_fp.go).
func e4m3(c uint8) float32 {
	e, m := int(c>>3&15), float32(c&7)
	var v float32
	switch {
	case c&0x7f == 0x7f:
		v = float32(math.NaN())
	case e == 0:
		v = m * 0x1p-9
	default:
		v = float32(math.Ldexp(float64(1+m/8), e-7))
	}
	if c&0x80 != 0 {
		return -v
	}
	return v
}
