package metal

import (
	"fmt"
	"math"

	"github.com/stratakernels/strata/kernels"
)

// Host side of the norms and GatedResidual reads of prompt.metal.

func checkEps(op string, eps float32) error {
	if !(eps >= 0) || math.IsInf(float64(eps), 1) {
		return fmt.Errorf("%s: %w: eps=%g", op, kernels.ErrArg, eps)
	}
	return nil
}

// RMSNorm1p is rms_norm (kernels.RMSNorm1p on the device): y = x * rsqrt(mean(x^2) + eps) *
// (1 + w) per row of D, float32 throughout (sum of squares per thread in index order, then
// simd and simdgroup sums in fixed order). x, y [rows, D]; w [D]. Agrees with the CPU's
// float64-sum op to about 1e-6 relative. Errors wrap kernels.ErrShape or kernels.ErrArg.
func (b *Backend) RMSNorm1p(y, x []float32, rows, D int, w []float32, eps float32) error {
	const op = "RMSNorm1p"
	if rows < 0 || D <= 0 || len(x) != rows*D || len(y) != rows*D || len(w) != D {
		return fmt.Errorf("%s: %w: rows=%d D=%d len(x)=%d len(y)=%d len(w)=%d",
			op, kernels.ErrShape, rows, D, len(x), len(y), len(w))
	}
	if err := checkEps(op, eps); err != nil {
		return err
	}
	return b.rmsRows(op, y, x, rows, 1, D, w, eps)
}

// RMSNorm1pGrouped is the grouped form (kernels.RMSNorm1pGrouped on the device): x, y [T, S, D],
// stream s normalised with w[s*D:(s+1)*D]. Runs gr_norm_h4 (one threadgroup per token) or,
// under Prefer("gr_norm_h4", "rms_norm"), rms_norm (one per row); both give the same bits.
// Errors wrap kernels.ErrShape or kernels.ErrArg.
func (b *Backend) RMSNorm1pGrouped(y, x []float32, T, S, D int, w []float32, eps float32) error {
	const op = "RMSNorm1pGrouped"
	if T < 0 || S <= 0 || D <= 0 || len(x) != T*S*D || len(y) != T*S*D || len(w) != S*D {
		return fmt.Errorf("%s: %w: T=%d S=%d D=%d len(x)=%d len(y)=%d len(w)=%d",
			op, kernels.ErrShape, T, S, D, len(x), len(y), len(w))
	}
	if err := checkEps(op, eps); err != nil {
		return err
	}
	if b.preferred("gr_norm_h4", "gr_norm_h4") == "rms_norm" {
		return b.rmsRows(op, y, x, T*S, S, D, w, eps)
	}
	if err := guard32(op, T*S*D); err != nil || T == 0 {
		return err
	}
	pipe, err := b.pipeline("prompt.metal", "gr_norm_h4", nil)
	if err != nil {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	nt := elemThreads(D)
	by := j.alloc(len(y))
	j.dispatch(pipe, fmt.Sprintf("gr_norm_h4_f32_s%d_tg%d", S, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 0,
		by, j.f32(x), j.f32(w), params(D, S, eps))
	if err := j.finish(); err != nil {
		return err
	}
	copy(y, f32view(by, len(y)))
	return nil
}

// rmsRows runs rms_norm over rows of D, row i with weights w[(i % S) * D ...].
func (b *Backend) rmsRows(op string, y, x []float32, rows, S, D int, w []float32, eps float32) error {
	if err := guard32(op, rows*D); err != nil || rows == 0 {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	by := j.alloc(len(y))
	if err := j.rmsRows(by, j.f32(x), rows, S, D, j.f32(w), eps); err != nil {
		return err
	}
	if err := j.finish(); err != nil {
		return err
	}
	copy(y, f32view(by, len(y)))
	return nil
}

func (j *Pass) rmsRows(y, x *Tensor, rows, S, D int, w *Tensor, eps float32) error {
	if rows == 0 {
		return j.err
	}
	pipe, err := j.b.pipeline("prompt.metal", "rms_norm", nil)
	if err != nil {
		return j.fail(err)
	}
	nt := elemThreads(D)
	j.dispatch(pipe, fmt.Sprintf("rms_norm_f32_s%d_tg%d", S, nt), [3]int{rows, 1, 1}, [3]int{nt, 1, 1}, 0,
		y, x, w, params(D, S, eps))
	return j.err
}

// RMSNorm1p encodes y = RMSNorm1p(x) over rows of D (Backend.RMSNorm1p on device tensors; w
// [D] is a model weight). Errors wrap kernels.ErrShape or kernels.ErrArg.
func (j *Pass) RMSNorm1p(y, x *Tensor, rows, D int, w []float32, eps float32) error {
	const op = "RMSNorm1p"
	if rows < 0 || D <= 0 || x.Len() < rows*D || y.Len() < rows*D || len(w) != D {
		return j.fail(fmt.Errorf("%s: %w: rows=%d D=%d len(w)=%d", op, kernels.ErrShape, rows, D, len(w)))
	}
	if err := checkEps(op, eps); err != nil {
		return j.fail(err)
	}
	return j.rmsRows(y, x, rows, 1, D, j.vec(w), eps)
}

// grNormH4 encodes the grouped norm hn [T, S, D] = RMSNorm1p(h) with stream weights w [S*D].
func (j *Pass) grNormH4(hn, h *Tensor, T, S, D int, w *Tensor, eps float32) error {
	pn, err := j.b.pipeline("prompt.metal", "gr_norm_h4", nil)
	if err != nil {
		return j.fail(err)
	}
	nt := elemThreads(D)
	j.dispatch(pn, fmt.Sprintf("gr_norm_h4_f32_s%d_tg%d", S, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 0,
		hn, h, w, params(D, S, eps))
	return j.err
}

// GRNormHStreamOut is gr_norm_h_stream_out, the output side of a GatedResidual read (and of the
// final hyper-connection mixer): with Hn = grouped RMSNorm1p(H) (hw [S*D], recomputed, same bits
// as RMSNorm1pGrouped) and a the pre-sigmoid read gate (W_up output) [T, S, D]:
// x[t, d] = (sum over s in order of sigmoid(a[t, s, d]) * Hn[t, s, d]) / S.
// H [T, S, D]; x [T, D]. Math: MODELS.md GatedResidual. Errors wrap kernels.ErrShape or
// kernels.ErrArg.
func (b *Backend) GRNormHStreamOut(x, H, a, hw []float32, T, S, D int, eps float32) error {
	const op = "GRNormHStreamOut"
	if T < 0 || S <= 0 || S > 8 || D <= 0 || len(x) != T*D || len(H) != T*S*D || len(a) != T*S*D || len(hw) != S*D {
		return fmt.Errorf("%s: %w: T=%d S=%d D=%d len(x)=%d len(H)=%d len(a)=%d len(hw)=%d (S must be 1..8)",
			op, kernels.ErrShape, T, S, D, len(x), len(H), len(a), len(hw))
	}
	if err := checkEps(op, eps); err != nil {
		return err
	}
	if err := guard32(op, T*S*D); err != nil || T == 0 {
		return err
	}
	pipe, err := b.pipeline("prompt.metal", "gr_norm_h_stream_out", nil)
	if err != nil {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	nt := elemThreads(D)
	bx := j.alloc(len(x))
	j.dispatch(pipe, fmt.Sprintf("gr_norm_h_stream_out_f32_s%d_tg%d", S, nt), [3]int{T, 1, 1}, [3]int{nt, 1, 1}, 0,
		bx, j.f32(H), j.f32(a), j.f32(hw), params(D, S, eps))
	if err := j.finish(); err != nil {
		return err
	}
	copy(x, f32view(bx, len(x)))
	return nil
}

// Embed is embed: H[t, s, :] = table[tok[t], :] widened exactly to float32 and repeated into S
// streams (S = 4 for qwen4_exp's hyper-connection streams, 1 for qwen3_next). table is the
// embedding matrix [V, D] in BF16 or F16 (a kernels.Matrix with N = V, K = D); tok [T]; H [T, S, D].
// Errors wrap kernels.ErrShape, kernels.ErrArg (token id outside [0, V)) or kernels.ErrDType.
func (b *Backend) Embed(H []float32, tok []int32, table *kernels.Matrix, S int) error {
	const op = "Embed"
	if table == nil || table.N <= 0 || table.K <= 0 || len(table.U16) != table.N*table.K {
		return fmt.Errorf("%s: %w: embedding table missing or not a 16-bit [V, D] matrix", op, kernels.ErrShape)
	}
	if table.DType != kernels.BF16 && table.DType != kernels.F16 {
		return fmt.Errorf("%s: %w: %v table (BF16 or F16 only)", op, kernels.ErrDType, table.DType)
	}
	T, V, D := len(tok), table.N, table.K
	if S <= 0 || len(H) != T*S*D {
		return fmt.Errorf("%s: %w: T=%d S=%d D=%d len(H)=%d", op, kernels.ErrShape, T, S, D, len(H))
	}
	for i, id := range tok {
		if id < 0 || int(id) >= V {
			return fmt.Errorf("%s: %w: token %d is %d, vocab %d", op, kernels.ErrArg, i, id, V)
		}
	}
	if err := guard32(op, V*D, T*S*D); err != nil || T == 0 {
		return err
	}
	pipe, err := b.pipeline("prompt.metal", "embed", nil)
	if err != nil {
		return err
	}
	j, err := b.begin()
	if err != nil {
		return err
	}
	defer j.release()
	nt := elemThreads(D)
	bh := j.alloc(len(H))
	j.dispatch(pipe, fmt.Sprintf("embed_%s_s%d", table.DType, S), [3]int{(D + nt - 1) / nt, T, 1}, [3]int{nt, 1, 1}, 0,
		bh, j.u16(table.U16), j.i32(tok), params(T, D, S, V, table.DType == kernels.BF16))
	if err := j.finish(); err != nil {
		return err
	}
	copy(H, f32view(bh, len(H)))
	return nil
}
