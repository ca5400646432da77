package metal

import (
	"fmt"

	"github.com/stratakernels/strata/kernels"
)

// Host side of the element-wise kernels of prompt.metal (ew_act, ew_add, ew_sigmoid_mul,
// row_sigmoid_scale) and of swiglu (gemm.metal). Activations are float32 with the device's exp;
// agreement with the CPU's float64 activations about 1e-7 relative per element.

// Activations of ew_act.
const (
	actIdentity = 0
	actSilu     = 1
	actSigmoid  = 2
)

// encodeAct encodes y = mul * act(x / div) over n elements into j (y may be x).
func (b *Backend) encodeAct(j *Pass, y, x *Tensor, n int, div, mul float32, act int) error {
	pipe, err := b.pipeline("prompt.metal", "ew_act", nil)
	if err != nil {
		return j.fail(err)
	}
	name := [...]string{"ew_act_identity", "ew_act_silu", "ew_act_sigmoid"}[act]
	j.dispatch(pipe, name, [3]int{(n + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0, y, x, params(n, div, mul, act))
	return j.err
}

// ewRun runs one element-wise kernel over n elements: out (updated in place and read back) and
// the read-only inputs, with params (n, D, hasV).
func (b *Backend) ewRun(op, fn string, out []float32, ins [][]float32, D int, hasV bool) error {
	n := len(out)
	if err := guard32(op, n); err != nil || n == 0 {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	bo := j.f32(out)
	var tins []*Tensor
	for _, in := range ins {
		if in == nil {
			tins = append(tins, j.alloc(1))
		} else {
			tins = append(tins, j.f32(in))
		}
	}
	if err := j.ew(fn, bo, tins, n, D, hasV); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(out, f32view(bo, n))
	return nil
}

// ew encodes one element-wise kernel over n elements of out with params (n, D, hasV).
func (j *Pass) ew(fn string, out *Tensor, ins []*Tensor, n, D int, hasV bool) error {
	if n == 0 {
		return j.err
	}
	pipe, err := j.b.pipeline("prompt.metal", fn, nil)
	if err != nil {
		return j.fail(err)
	}
	args := []arg{out}
	for _, in := range ins {
		args = append(args, in)
	}
	args = append(args, params(n, D, hasV))
	j.dispatch(pipe, fn+"_f32", [3]int{(n + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0, args...)
	return j.err
}

// Add encodes h[i] += u[i] + v[i] over h's elements (v nil: h += u). Errors wrap kernels.ErrShape.
func (j *Pass) Add(h, u, v *Tensor) error {
	n := h.Len()
	if u.Len() < n || (v != nil && v.Len() < n) {
		return j.fail(fmt.Errorf("Add: %w: tensors shorter than h", kernels.ErrShape))
	}
	vv := v
	if v == nil {
		vv = u
	}
	return j.ew("ew_add", h, []*Tensor{u, vv}, n, 1, v != nil)
}

// SigmoidMul encodes o[i] *= sigmoid(g[i]) over o's elements. Errors wrap kernels.ErrShape.
func (j *Pass) SigmoidMul(o, g *Tensor) error {
	if g.Len() < o.Len() {
		return j.fail(fmt.Errorf("SigmoidMul: %w: len(g) < len(o)", kernels.ErrShape))
	}
	return j.ew("ew_sigmoid_mul", o, []*Tensor{g}, o.Len(), 1, false)
}

// RowSigmoidScale encodes x[r, :] *= sigmoid(s[r]) for x [rows, D]. Errors wrap kernels.ErrShape.
func (j *Pass) RowSigmoidScale(x, s *Tensor, rows, D int) error {
	if D <= 0 || rows < 0 || x.Len() < rows*D || s.Len() < rows {
		return j.fail(fmt.Errorf("RowSigmoidScale: %w: rows=%d D=%d", kernels.ErrShape, rows, D))
	}
	return j.ew("row_sigmoid_scale", x, []*Tensor{s}, rows*D, D, false)
}

// SwiGLU encodes h [rows, I] = silu(gu[:, :I]) * gu[:, I:]. Errors wrap kernels.ErrShape.
func (j *Pass) SwiGLU(h, gu *Tensor, rows, I int) error {
	if I <= 0 || rows < 0 || h.Len() < rows*I || gu.Len() < 2*rows*I {
		return j.fail(fmt.Errorf("SwiGLU: %w: rows=%d I=%d", kernels.ErrShape, rows, I))
	}
	if rows == 0 {
		return j.err
	}
	pipe, err := j.b.pipeline("gemm.metal", "swiglu", []mtlConst{boolConst(0, true)})
	if err != nil {
		return j.fail(err)
	}
	j.dispatch(pipe, "swiglu_f32", [3]int{(rows*I + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0, h, gu, params(rows, I))
	return j.err
}

// Add is ew_add: h[i] += u[i] + v[i] (u + v first; v may be nil): the residual add of the
// qwen3_next blocks. h, u, v of one length. Errors wrap kernels.ErrShape.
func (b *Backend) Add(h, u, v []float32) error {
	if len(u) != len(h) || (v != nil && len(v) != len(h)) {
		return fmt.Errorf("Add: %w: len(h)=%d len(u)=%d len(v)=%d", kernels.ErrShape, len(h), len(u), len(v))
	}
	return b.ewRun("Add", "ew_add", h, [][]float32{u, v}, 1, v != nil)
}

// SigmoidMul is ew_sigmoid_mul: o[i] *= sigmoid(g[i]) (the attention output gate, o and g
// [T, Hq, D]). Errors wrap kernels.ErrShape.
func (b *Backend) SigmoidMul(o, g []float32) error {
	if len(g) != len(o) {
		return fmt.Errorf("SigmoidMul: %w: len(o)=%d len(g)=%d", kernels.ErrShape, len(o), len(g))
	}
	return b.ewRun("SigmoidMul", "ew_sigmoid_mul", o, [][]float32{g}, 1, false)
}

// RowSigmoidScale is row_sigmoid_scale: x[r, :] *= sigmoid(s[r]) for x [rows, D], s [rows] (the
// shared expert's gate). Errors wrap kernels.ErrShape.
func (b *Backend) RowSigmoidScale(x, s []float32, rows, D int) error {
	if rows < 0 || D <= 0 || len(x) != rows*D || len(s) != rows {
		return fmt.Errorf("RowSigmoidScale: %w: rows=%d D=%d len(x)=%d len(s)=%d", kernels.ErrShape, rows, D, len(x), len(s))
	}
	return b.ewRun("RowSigmoidScale", "row_sigmoid_scale", x, [][]float32{s}, D, false)
}

// SwiGLU is swiglu: h [rows, I] = silu(gu[:, :I]) * gu[:, I:] for gu [rows, 2I] (gate columns
// first, the fused gate_up output of a dense MLP or shared expert). Errors wrap kernels.ErrShape.
func (b *Backend) SwiGLU(h, gu []float32, rows, I int) error {
	const op = "SwiGLU"
	if rows < 0 || I <= 0 || len(h) != rows*I || len(gu) != 2*rows*I {
		return fmt.Errorf("%s: %w: rows=%d I=%d len(h)=%d len(gu)=%d", op, kernels.ErrShape, rows, I, len(h), len(gu))
	}
	if err := guard32(op, 2*rows*I); err != nil || rows == 0 {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	bh := j.alloc(len(h))
	if err := j.SwiGLU(bh, j.f32(gu), rows, I); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(h, f32view(bh, len(h)))
	return nil
}

// Copy encodes dst[i] = src[i] over src's elements (copy_f32; a compute kernel, since the device
// interface has no blit encoder). Errors wrap kernels.ErrShape.
func (j *Pass) Copy(dst, src *Tensor) error {
	n := src.Len()
	if dst.Len() < n {
		return j.fail(fmt.Errorf("Copy: %w: %d elements into %d", kernels.ErrShape, n, dst.Len()))
	}
	if err := guard32("Copy", n); err != nil || n == 0 {
		return j.fail(err)
	}
	pipe, err := j.b.pipeline("prompt.metal", "copy_f32", nil)
	if err != nil {
		return j.fail(err)
	}
	j.dispatch(pipe, "copy_f32_tg256", [3]int{(n + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0, dst, src, params(n))
	return j.err
}
