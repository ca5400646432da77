package metal

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// Host side of elementwise.metal (ew_act, ew_add, ew_sigmoid_mul,
// row_sigmoid_scale, copy_f32) and of swiglu (gemm.metal). Activations are float32 with the
// device's exp; agreement with the CPU's float64 activations about 1e-7 relative per element.

// Activations of ew_act.
const (
	actIdentity = 0
	actSilu     = 1
	actSigmoid  = 2
)

// encodeAct encodes y = mul * act(x / div) over n elements into j (y may be x).
func (b *Backend) encodeAct(j *Pass, y, x *Tensor, n int, div, mul float32, act int) error {
	pipe, err := b.pipeline("elementwise.metal", "ew_act", nil)
	if err != nil {
		return j.fail(err)
	}
	name := [...]string{"ew_act_identity", "ew_act_silu", "ew_act_sigmoid"}[act]
	nt := fitWidth(pipe, 256)
	j.dispatch(pipe, name, [3]int{(n + nt - 1) / nt, 1, 1}, [3]int{nt, 1, 1}, 0, y, x, paramBytes(actParams{N: n, Div: div, Mul: mul, Act: act}))
	return j.err
}

// ew encodes one element-wise kernel over n elements of out with params (n, D, hasV).
func (j *Pass) ew(fn string, out *Tensor, ins []*Tensor, n, D int, hasV bool) error {
	if err := guard32(fn, n); err != nil {
		return j.fail(err)
	}
	if n == 0 {
		return j.err
	}
	pipe, err := j.b.pipeline("elementwise.metal", fn, nil)
	if err != nil {
		return j.fail(err)
	}
	args := []arg{out}
	for _, in := range ins {
		args = append(args, in)
	}
	args = append(args, paramBytes(ewParams{N: n, D: D, HasV: hasV}))
	nt := fitWidth(pipe, 256)
	j.dispatch(pipe, fn+"_f32", [3]int{(n + nt - 1) / nt, 1, 1}, [3]int{nt, 1, 1}, 0, args...)
	return j.err
}

// Add implements op.Pass with ew_add: h[i] += u[i] + v[i] (u + v first; v nil: h += u).
func (j *Pass) Add(a op.Add) error {
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	h, u, v := j.dev("H", a.H), j.dev("u", a.U), j.dev("v", a.V)
	if j.err != nil {
		return j.err
	}
	vv := v
	if v == nil {
		vv = u
	}
	return j.ew("ew_add", h, []*Tensor{u, vv}, h.Len(), 1, v != nil)
}

// SigmoidMul implements op.Pass with ew_sigmoid_mul: o[i] *= sigmoid(g[i]).
func (j *Pass) SigmoidMul(a op.SigmoidMul) error {
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	o, g := j.dev("o", a.O), j.dev("gate", a.G)
	if j.err != nil {
		return j.err
	}
	return j.ew("ew_sigmoid_mul", o, []*Tensor{g}, o.Len(), 1, false)
}

// RowSigmoidScale implements op.Pass with row_sigmoid_scale: x[r, :] *= sigmoid(s[r]).
func (j *Pass) RowSigmoidScale(a op.RowSigmoidScale) error {
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	x, s := j.dev("x", a.X), j.dev("s", a.S)
	if j.err != nil {
		return j.err
	}
	return j.ew("row_sigmoid_scale", x, []*Tensor{s}, a.Rows*a.D, a.D, false)
}

// SwiGLU implements op.Pass with swiglu: h [rows, I] = silu(gu[:, :I]) * gu[:, I:], or with
// swiglu_split: h = silu(gu) * u (op.SwiGLU.U).
func (j *Pass) SwiGLU(a op.SwiGLU) error {
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	h, gu := j.dev("h", a.H), j.dev("gu", a.GU)
	if j.err != nil {
		return j.err
	}
	if err := guard32("SwiGLU", 2*a.Rows*a.I); err != nil {
		return j.fail(err)
	}
	if op.Present(a.U) {
		u := j.dev("u", a.U)
		if j.err != nil || a.Rows == 0 {
			return j.err
		}
		pipe, err := j.b.pipeline("gemm.metal", "swiglu_split", []mtlConst{boolConst(0, true)})
		if err != nil {
			return j.fail(err)
		}
		j.dispatch(pipe, "swiglu_split_f32", [3]int{(a.Rows*a.I + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0, h, gu, u, paramBytes(swigluParams{Rows: a.Rows, I: a.I}))
		return j.err
	}
	return j.swiglu(h, gu, a.Rows, a.I)
}

func (j *Pass) swiglu(h, gu *Tensor, rows, I int) error {
	if rows == 0 {
		return j.err
	}
	pipe, err := j.b.pipeline("gemm.metal", "swiglu", []mtlConst{boolConst(0, true)})
	if err != nil {
		return j.fail(err)
	}
	nt := fitWidth(pipe, 256)
	j.dispatch(pipe, "swiglu_f32", [3]int{(rows*I + nt - 1) / nt, 1, 1}, [3]int{nt, 1, 1}, 0, h, gu, paramBytes(swigluParams{Rows: rows, I: I}))
	return j.err
}

// Copy implements op.Pass with copy_f32 (a compute kernel, since the device interface has no
// blit encoder; it copies 4-byte elements, so it serves I32 tensors too).
func (j *Pass) Copy(a op.Copy) error {
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	dst, src := j.dev("dst", a.Dst), j.dev("src", a.Src)
	if j.err != nil {
		return j.err
	}
	return j.copy(dst, src)
}

func (j *Pass) copy(dst, src *Tensor) error {
	n := src.Len()
	if err := guard32("Copy", n); err != nil || n == 0 {
		return j.fail(err)
	}
	pipe, err := j.b.pipeline("elementwise.metal", "copy_f32", nil)
	if err != nil {
		return j.fail(err)
	}
	nt := fitWidth(pipe, 256)
	j.dispatch(pipe, fmt.Sprintf("copy_f32_tg%d", nt), [3]int{(n + nt - 1) / nt, 1, 1}, [3]int{nt, 1, 1}, 0, dst, src, paramBytes(copyParams{N: n}))
	return j.err
}

// unsupported records an error wrapping op.ErrUnsupported naming what the Metal kernels lack.
func (j *Pass) unsupported(opName, format string, args ...any) error {
	return j.fail(fmt.Errorf("metal: %s: %w: %s", opName, op.ErrUnsupported, fmt.Sprintf(format, args...)))
}
