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
func (b *Backend) encodeAct(j *job, y, x mtlBuffer, n int, div, mul float32, act int) error {
	pipe, err := b.pipeline("prompt.metal", "ew_act", nil)
	if err != nil {
		return err
	}
	name := [...]string{"ew_act_identity", "ew_act_silu", "ew_act_sigmoid"}[act]
	j.dispatch(pipe, name, [3]int{(n + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0, y, x, params(n, div, mul, act))
	return nil
}

// ewRun runs one element-wise kernel over n elements: out (updated in place and read back) and
// the read-only inputs, with params (n, D, hasV).
func (b *Backend) ewRun(op, fn string, out []float32, ins [][]float32, D int, hasV bool) error {
	n := len(out)
	if err := guard32(op, n); err != nil || n == 0 {
		return err
	}
	pipe, err := b.pipeline("prompt.metal", fn, nil)
	if err != nil {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	bo := j.f32(out)
	args := []arg{bo}
	for _, in := range ins {
		if in == nil {
			args = append(args, j.alloc(4))
		} else {
			args = append(args, j.f32(in))
		}
	}
	args = append(args, params(n, D, hasV))
	j.dispatch(pipe, fn+"_f32", [3]int{(n + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0, args...)
	if err := j.finish(); err != nil {
		return err
	}
	copy(out, f32view(bo, n))
	return nil
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
	pipe, err := b.pipeline("gemm.metal", "swiglu", []mtlConst{boolConst(0, true)})
	if err != nil {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	bh := j.alloc(4 * len(h))
	j.dispatch(pipe, "swiglu_f32", [3]int{(rows*I + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0, bh, j.f32(gu), params(rows, I))
	if err := j.finish(); err != nil {
		return err
	}
	copy(h, f32view(bh, len(h)))
	return nil
}
