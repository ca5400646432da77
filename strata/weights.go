package strata

import (
	"fmt"
	"slices"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/gguf"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// loader reads the weights a plan refers to (family.Mat, family.Vec) from a checkpoint, whose
// tensors family.CheckCheckpoint checked against the plan. Quantized modules (quant) become
// op.QAffine, op.QFloat or op.FP8Block matrices viewing the mapped codes, scales and biases; a
// stacked tensor is read once and its slices shared.
type loader struct {
	ck     *safetensors.Checkpoint
	gg     *gguf.File // a GGUF file in place of ck (ggufMatrices, ggufVec)
	quant  map[string]family.QuantTensor
	shapes map[string][]int64 // the plan's tensors' logical shapes
	slices map[string][]*op.Matrix
	shared map[string]*safetensors.Tensor // whole-tensor FP8 scales shared by a table's row blocks
	// progress accounting
	done, total int64
	progress    func(done, total int64, name string)
}

func newLoader(ck *safetensors.Checkpoint, res *family.CheckResult, progress func(done, total int64, name string)) *loader {
	l := &loader{ck: ck, quant: res.Quant, shapes: map[string][]int64{}, slices: map[string][]*op.Matrix{}, shared: map[string]*safetensors.Tensor{}, total: res.UsedBytes, progress: progress}
	for _, s := range res.Plan.Tensors {
		l.shapes[s.Name] = s.Shape
	}
	return l
}

// mat reads a plan matrix: a view of one tensor (or of one slice of a stacked one) when it is a
// single whole part, else the rows of its parts concatenated into a copy.
func (l *loader) mat(m family.Mat) (*op.Matrix, error) {
	var parts []rowPart
	for _, p := range m.Parts {
		src, err := l.source(p)
		if err != nil {
			return nil, err
		}
		parts = append(parts, rowPart{src, p.Row, p.Rows})
	}
	if len(parts) == 1 && parts[0].row == 0 && parts[0].cnt == parts[0].src.N {
		return parts[0].src, nil
	}
	out, err := concatRows(parts)
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "regrouping rows of %s", m.Parts[0].Tensor)
	}
	return out, nil
}

// source returns the whole matrix a part reads rows of: its 2-D tensor, or its slice of a 3-D one.
func (l *loader) source(p family.Part) (*op.Matrix, error) {
	ms, ok := l.slices[p.Tensor]
	if !ok {
		s := l.shapes[p.Tensor]
		var err error
		switch len(s) {
		case 2:
			ms, err = l.matrices(p.Tensor, 0, int(s[0]), int(s[1]))
		case 3:
			ms, err = l.matrices(p.Tensor, int(s[0]), int(s[1]), int(s[2]))
		default:
			err = wrapf(ErrCheckpoint, nil, "tensor %s of shape %v is not a matrix or a stack of them", p.Tensor, s)
		}
		if err != nil {
			return nil, err
		}
		l.slices[p.Tensor] = ms
	}
	i := max(p.Index, 0)
	if i >= len(ms) {
		return nil, wrapf(ErrCheckpoint, nil, "tensor %s holds %d matrices, the plan reads number %d", p.Tensor, len(ms), i)
	}
	return ms[i], nil
}

func (l *loader) tensor(name string, shape ...int64) (*safetensors.Tensor, error) {
	t, err := l.ck.Tensor(name)
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "tensor %s", name)
	}
	if len(shape) > 0 {
		ok := len(shape) == len(t.Shape)
		for i := 0; ok && i < len(shape); i++ {
			ok = shape[i] == t.Shape[i]
		}
		if !ok {
			return nil, wrapf(ErrCheckpoint, nil, "tensor %s in %s has shape %v, config implies %v", name, t.File, t.Shape, shape)
		}
	}
	l.done += int64(len(t.Data))
	if l.progress != nil {
		l.progress(l.done, l.total, name)
	}
	return t, nil
}

// vec reads a float vector widened to float32. A gain stored as 1 + w (family.Vec.Shifted) is
// read as stored - 1.
func (l *loader) vec(v family.Vec) ([]float32, error) {
	if l.gg != nil {
		return l.ggufVec(v)
	}
	if _, ok := l.quant[v.Tensor]; ok {
		return nil, wrapf(ErrCheckpoint, nil, "tensor %s is quantized, but strata reads it as a float vector", v.Tensor)
	}
	t, err := l.tensor(v.Tensor, l.shapes[v.Tensor]...)
	if err != nil {
		return nil, err
	}
	x, err := t.Float32()
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "tensor %s", v.Tensor)
	}
	if len(x) != v.Len {
		return nil, wrapf(ErrCheckpoint, nil, "tensor %s holds %d values, the plan reads %d", v.Tensor, len(x), v.Len)
	}
	if v.Shifted {
		for i := range x {
			x[i]-- // exact in float32 for the 16-bit values stored, but for |stored| < 2^-17 (an ulp of 2^-24 off)
		}
	}
	return x, nil
}

// matrices reads the e [n, k] slices of a stacked 3-D weight [e, n, k] (e > 0; 0 reads a 2-D
// weight [n, k] as one matrix), each a view of the mapping: bf16/f16 kept in their own format,
// f32 as f32, quantized modules packed (QAffine views of the codes, scales and biases; QFloat
// views of the codes and scales; FP8Block views of the codes with their scale grid, or with the
// one scale of the tensor repeated over the grid).
func (l *loader) matrices(name string, e, n, k int) ([]*op.Matrix, error) {
	stack, lead := max(e, 1), []int64{}
	if e > 0 {
		lead = []int64{int64(e)}
	}
	if l.gg != nil {
		return l.ggufMatrices(name, e, n, k)
	}
	q, quantized := l.quant[name]
	if !quantized {
		t, err := l.tensor(name, append(lead, int64(n), int64(k))...)
		if err != nil {
			return nil, err
		}
		ms := make([]*op.Matrix, stack)
		for i := range ms {
			if ms[i], err = tensorMatrix(t, n, k, i*n*k*t.DType.Size()); err != nil {
				return nil, err
			}
		}
		return ms, nil
	}
	// family.CheckCheckpoint checked the codes', scales' and biases' dtypes and shapes.
	switch q.Format {
	case family.FP8Blocks, family.FP8Tensor:
		m, err := l.fp8(q, n, k)
		return []*op.Matrix{m}, err
	case family.MLXFloat:
		return l.qfloat(q, stack, lead, n, k)
	}
	w, err := l.tensor(q.Weight, append(lead, int64(n), int64(k*q.Bits/32))...)
	if err != nil {
		return nil, err
	}
	sc, err := l.tensor(q.Scales, append(lead, int64(n), int64(k/q.Group))...)
	if err != nil {
		return nil, err
	}
	bi, err := l.tensor(q.Biases, append(lead, int64(n), int64(k/q.Group))...)
	if err != nil {
		return nil, err
	}
	codes, err := w.Uint32s()
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "tensor %s", q.Weight)
	}
	scales, err := sc.Uint16s()
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "tensor %s", q.Scales)
	}
	biases, err := bi.Uint16s()
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "tensor %s", q.Biases)
	}
	sdt := op.BF16
	if q.ScaleDType == safetensors.F16 {
		sdt = op.F16
	}
	words, groups := n*k*q.Bits/32, n*(k/q.Group)
	ms := make([]*op.Matrix, stack)
	for i := range ms {
		m := &op.Matrix{N: n, K: k, DType: op.QAffine, Q: &op.Quant{Bits: q.Bits, Group: q.Group, ScaleDType: sdt,
			Codes: codes[i*words : (i+1)*words], Scales: scales[i*groups : (i+1)*groups], Biases: biases[i*groups : (i+1)*groups]}}
		if err := m.Validate("load"); err != nil {
			return nil, wrapf(ErrCheckpoint, err, "tensor %s", q.Weight)
		}
		ms[i] = m
	}
	return ms, nil
}

// qfloat reads the stack slices of an MLX float-mode weight (mxfp4, nvfp4, mxfp8): views of the
// U32 codes and the U8 scales.
func (l *loader) qfloat(q family.QuantTensor, stack int, lead []int64, n, k int) ([]*op.Matrix, error) {
	w, err := l.tensor(q.Weight, append(lead, int64(n), int64(k*q.Bits/32))...)
	if err != nil {
		return nil, err
	}
	sc, err := l.tensor(q.Scales, append(lead, int64(n), int64(k/q.Group))...)
	if err != nil {
		return nil, err
	}
	codes, err := w.Uint32s()
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "tensor %s", q.Weight)
	}
	scales, err := sc.Bytes()
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "tensor %s", q.Scales)
	}
	words, groups := n*k*q.Bits/32, n*(k/q.Group)
	ms := make([]*op.Matrix, stack)
	for i := range ms {
		ms[i], err = op.NewMatrixQFloat(n, k, &op.QuantFloat{Mode: q.Mode, Codes: codes[i*words : (i+1)*words], Scales: scales[i*groups : (i+1)*groups]})
		if err != nil {
			return nil, wrapf(ErrCheckpoint, err, "tensor %s", q.Weight)
		}
	}
	return ms, nil
}

// fp8 reads an FP8 weight [n, k]: a view of its E4M3 codes with its BF16 or F32 scale grid (a
// view of a BF16 <module>.weight_scale_inv, a copy of an F32 one), or with the tensor's one scale repeated over the grid
// (FP8Tensor: a copy of ceil(n/128) * ceil(k/128) scales).
func (l *loader) fp8(q family.QuantTensor, n, k int) (*op.Matrix, error) {
	w, err := l.tensor(q.Weight, int64(n), int64(k))
	if err != nil {
		return nil, err
	}
	codes, err := w.Bytes()
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "tensor %s", q.Weight)
	}
	grid := op.FP8Grid(n, k)
	f := &op.BlockFP8{Codes: codes, Grid: grid, ScaleDType: op.BF16}
	var sc *safetensors.Tensor
	switch {
	case q.Format == family.FP8Blocks:
		sc, err = l.tensor(q.Scales, int64(grid[0]), int64(grid[1]))
	case l.shared[q.Scales] != nil: // the one scale of a table's row blocks, read (and counted) once
		sc = l.shared[q.Scales]
	default:
		sc, err = l.tensor(q.Scales)
		l.shared[q.Scales] = sc
	}
	if err != nil {
		return nil, err
	}
	if q.ScaleDType == safetensors.F32 {
		f.ScaleDType = op.F32
		if f.ScalesF32, err = sc.Float32(); err != nil {
			return nil, wrapf(ErrCheckpoint, err, "tensor %s", q.Scales)
		}
	} else if f.Scales, err = sc.Uint16s(); err != nil {
		return nil, wrapf(ErrCheckpoint, err, "tensor %s", q.Scales)
	}
	if q.Format == family.FP8Tensor {
		cells := grid[0] * grid[1]
		if f.ScaleDType == op.F32 {
			f.ScalesF32 = slices.Repeat(f.ScalesF32[:1], cells)
		} else {
			f.Scales = slices.Repeat(f.Scales[:1], cells)
		}
	}
	m, err := op.NewMatrixFP8Block(n, k, f)
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "tensor %s", q.Weight)
	}
	return m, nil
}

func tensorMatrix(t *safetensors.Tensor, n, k int, byteOff int) (*op.Matrix, error) {
	switch t.DType {
	case safetensors.BF16, safetensors.F16:
		u, err := t.Uint16s()
		if err != nil {
			return nil, wrapf(ErrCheckpoint, err, "tensor %s", t.Name)
		}
		dt := op.BF16
		if t.DType == safetensors.F16 {
			dt = op.F16
		}
		off := byteOff / 2
		m, err := op.NewMatrixU16(n, k, dt, u[off:off+n*k])
		if err != nil {
			return nil, wrapf(ErrCheckpoint, err, "tensor %s", t.Name)
		}
		return m, nil
	case safetensors.F32:
		all, err := t.Float32()
		if err != nil {
			return nil, wrapf(ErrCheckpoint, err, "tensor %s", t.Name)
		}
		off := byteOff / 4
		m, err := op.NewMatrixF32(n, k, all[off:off+n*k])
		if err != nil {
			return nil, wrapf(ErrCheckpoint, err, "tensor %s", t.Name)
		}
		return m, nil
	}
	return nil, wrapf(ErrCheckpoint, nil, "tensor %s: dtype %s is not a weight type (want BF16, F16 or F32)", t.Name, t.DType)
}

// concatRows builds a weight from selected row ranges of one or more matrices (used to regroup
// Qwen3-Next's in_proj_qkvz / in_proj_ba and to fuse per-expert gate/up). Each part is (src,
// firstRow, nRows); all parts share K and dtype (and, quantized, the format: bits, group size and
// scale dtype, mode, or FP8 scale dtype, or GGUF block type: rows of codes, scales and biases
// (GGUF: rows of blocks) are concatenated, still packed; FP8 parts starting on 128-row block boundaries, as family.CheckCheckpoint checked). The result owns a
// copy. Errors wrap op.ErrUnsupported (parts that cannot share one matrix) or op.ErrShape.
type rowPart struct {
	src      *op.Matrix
	row, cnt int
}

func concatRows(parts []rowPart) (*op.Matrix, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("concatRows: no parts")
	}
	p0 := parts[0].src
	k, dt := p0.K, p0.DType
	n := 0
	for _, p := range parts {
		if p.src.K != k || p.src.DType != dt {
			return nil, fmt.Errorf("%w: concatRows: parts of K %d and %d or dtypes %v and %v", op.ErrUnsupported, k, p.src.K, dt, p.src.DType)
		}
		if q0, q := p0.Q, p.src.Q; dt == op.QAffine && (q.Bits != q0.Bits || q.Group != q0.Group || q.ScaleDType != q0.ScaleDType) {
			return nil, fmt.Errorf("%w: concatRows: parts quantized at %d bits in groups of %d (%v scales) and at %d bits in groups of %d (%v scales)",
				op.ErrUnsupported, q0.Bits, q0.Group, q0.ScaleDType, q.Bits, q.Group, q.ScaleDType)
		}
		if dt == op.GGML && p.src.GG.Type != p0.GG.Type {
			return nil, fmt.Errorf("%w: concatRows: GGUF parts of types %v and %v cannot share one matrix", op.ErrUnsupported, p0.GG.Type, p.src.GG.Type)
		}
		if dt == op.QFloat && p.src.QF.Mode != p0.QF.Mode || dt == op.FP8Block && p.src.FP8.ScaleDType != p0.FP8.ScaleDType {
			return nil, fmt.Errorf("%w: concatRows: parts of %v weights in different formats", op.ErrUnsupported, dt)
		}
		n += p.cnt
	}
	switch dt {
	case op.QAffine:
		words, groups := k*p0.Q.Bits/32, k/p0.Q.Group
		q := &op.Quant{Bits: p0.Q.Bits, Group: p0.Q.Group, ScaleDType: p0.Q.ScaleDType}
		for _, p := range parts {
			r0, r1 := p.row, p.row+p.cnt
			q.Codes = append(q.Codes, p.src.Q.Codes[r0*words:r1*words]...)
			q.Scales = append(q.Scales, p.src.Q.Scales[r0*groups:r1*groups]...)
			q.Biases = append(q.Biases, p.src.Q.Biases[r0*groups:r1*groups]...)
		}
		m := &op.Matrix{N: n, K: k, DType: op.QAffine, Q: q}
		return m, m.Validate("concatRows")
	case op.QFloat:
		words, groups := k*p0.QF.Mode.Bits()/32, k/p0.QF.Mode.Group()
		q := &op.QuantFloat{Mode: p0.QF.Mode}
		for _, p := range parts {
			r0, r1 := p.row, p.row+p.cnt
			q.Codes = append(q.Codes, p.src.QF.Codes[r0*words:r1*words]...)
			q.Scales = append(q.Scales, p.src.QF.Scales[r0*groups:r1*groups]...)
		}
		return op.NewMatrixQFloat(n, k, q)
	case op.FP8Block:
		const B = op.FP8BlockSize
		f := &op.BlockFP8{ScaleDType: p0.FP8.ScaleDType, Grid: op.FP8Grid(n, k)}
		cols := f.Grid[1]
		for _, p := range parts {
			if p.row%B != 0 {
				return nil, fmt.Errorf("%w: concatRows: FP8 rows from %d, not a %d-row block boundary", op.ErrUnsupported, p.row, B)
			}
			f.Codes = append(f.Codes, p.src.FP8.Codes[p.row*k:(p.row+p.cnt)*k]...)
			b0, b1 := p.row/B*cols, (p.row+p.cnt+B-1)/B*cols
			if f.ScaleDType == op.F32 {
				f.ScalesF32 = append(f.ScalesF32, p.src.FP8.ScalesF32[b0:b1]...)
			} else {
				f.Scales = append(f.Scales, p.src.FP8.Scales[b0:b1]...)
			}
		}
		return op.NewMatrixFP8Block(n, k, f)
	case op.GGML:
		row, err := p0.GG.Type.RowBytes(k)
		if err != nil {
			return nil, err
		}
		b := &op.GGMLBlocks{Type: p0.GG.Type, Data: make([]byte, 0, n*row)}
		for _, p := range parts {
			b.Data = append(b.Data, p.src.GG.Data[p.row*row:(p.row+p.cnt)*row]...)
		}
		return op.NewMatrixGGML(n, k, b)
	case op.F32:
		out := make([]float32, 0, n*k)
		for _, p := range parts {
			out = append(out, p.src.F32[p.row*k:(p.row+p.cnt)*k]...)
		}
		return op.NewMatrixF32(n, k, out)
	}
	out := make([]uint16, 0, n*k)
	for _, p := range parts {
		out = append(out, p.src.U16[p.row*k:(p.row+p.cnt)*k]...)
	}
	return op.NewMatrixU16(n, k, dt, out)
}
