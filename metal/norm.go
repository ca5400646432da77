package metal

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// Host side of norm.metal (rms_norm, gr_norm_h4).

// RMSNorm implements op.Pass with rms_norm: y = x * rsqrt(mean(x^2) + eps) * (1 + w) per row of D,
// float32 throughout (sum of squares per thread in index order, then simd and simdgroup sums in
// fixed order). Agrees with the CPU's float64-sum op to about 1e-6 relative.
func (j *Pass) RMSNorm(a op.RMSNorm) error {
	if err := a.Check(); err != nil {
		return j.fail(err)
	}
	y, x := j.dev("y", a.Y), j.dev("x", a.X)
	if j.err != nil {
		return j.err
	}
	return j.rmsRows(y, x, a.Rows, 1, a.D, j.vec(a.W), a.Eps)
}

func (j *Pass) rmsRows(y, x *Tensor, rows, S, D int, w *Tensor, eps float32) error {
	if rows == 0 {
		return j.err
	}
	pipe, err := j.b.pipeline("norm.metal", "rms_norm", nil)
	if err != nil {
		return j.fail(err)
	}
	nt := fitWidth(pipe, elemThreads(D))
	j.dispatch(pipe, fmt.Sprintf("rms_norm_f32_s%d_tg%d", S, nt), [3]int{rows, 1, 1}, [3]int{nt, 1, 1}, 0,
		y, x, w, paramBytes(normParams{D: D, S: S, Eps: eps}))
	return j.err
}

// grNormH4 encodes the grouped norm hn [T, S, D] = RMSNorm1p(h) with stream weights w [S*D]:
// gr_norm_h4 (one threadgroup per token) or, under Prefer("gr_norm_h4", "rms_norm"), rms_norm
// (one per row); both give the same bits.
func (j *Pass) grNormH4(hn, h *Tensor, T, S, D int, w *Tensor, eps float32) error {
	if j.b.preferred("gr_norm_h4", "gr_norm_h4") == "rms_norm" {
		return j.rmsRows(hn, h, T*S, S, D, w, eps)
	}
	pn, err := j.b.pipeline("norm.metal", "gr_norm_h4", nil)
	if err != nil {
		return j.fail(err)
	}
	nt := fitWidth(pn, elemThreads(D))
	j.dispatch(pn, fmt.Sprintf("gr_norm_h4_f32_s%d_tg%d", S, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 0,
		hn, h, w, paramBytes(normParams{D: D, S: S, Eps: eps}))
	return j.err
}
