package strata

import (
	"fmt"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// loader reads tensors of a checkpoint by logical name, checking shapes against the config.
type loader struct {
	ck     *safetensors.Checkpoint
	layout hfconfig.Layout
	// progress accounting
	done, total int64
	progress    func(done, total int64, name string)
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

// vec reads a 1-D (or any) float tensor widened to float32.
func (l *loader) vec(name string, shape ...int64) ([]float32, error) {
	t, err := l.tensor(name, shape...)
	if err != nil {
		return nil, err
	}
	v, err := t.Float32()
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "tensor %s", name)
	}
	return v, nil
}

// matrix reads a 2-D weight [n, k] (or a 3-D [e, n, k] slice e when sub >= 0) keeping bf16/f16
// weights in their own format (zero-copy on the mapping) and f32 as f32.
func (l *loader) matrix(name string, n, k int) (*op.Matrix, error) {
	t, err := l.tensor(name, int64(n), int64(k))
	if err != nil {
		return nil, err
	}
	return tensorMatrix(t, n, k, 0)
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

// stacked reads expert e's [n, k] slice of a 3-D tensor [E, n, k].
func stacked(t *safetensors.Tensor, e, n, k int) (*op.Matrix, error) {
	return tensorMatrix(t, n, k, e*n*k*t.DType.Size())
}

// rowsMatrix builds a weight from selected row ranges of one or more matrices (used to
// regroup Qwen3-Next's in_proj_qkvz / in_proj_ba and to fuse per-expert gate/up). Each part is
// (src, firstRow, nRows); all parts share K and dtype. The result owns a copy.
type rowPart struct {
	src      *op.Matrix
	row, cnt int
}

func concatRows(parts []rowPart) (*op.Matrix, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("concatRows: no parts")
	}
	k, dt := parts[0].src.K, parts[0].src.DType
	n := 0
	for _, p := range parts {
		if p.src.K != k || p.src.DType != dt {
			return nil, fmt.Errorf("concatRows: mixed K or dtype")
		}
		n += p.cnt
	}
	if dt == op.F32 {
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
