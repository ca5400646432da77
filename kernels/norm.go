package kernels

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// rmsScale1p writes y = x * rsqrt(mean(x^2) + eps) * (1 + w) for one vector. The sum of squares
// runs in float64 in four interleaved partial sums (element i into sum i%4, then (s0+s1)+(s2+s3):
// four independent add chains instead of one, a fixed order) and each output is rounded once,
// so every op that normalises a row through here (RMSNorm1p, the grouped norms of
// GatedResidual and PLE, their fused variants) produces the same bits for the same row.
// y may alias x.
func rmsScale1p(y, x, w []float32, eps float32) {
	x = x[:len(y)]
	w = w[:len(y)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		s0 += float64(v[0]) * float64(v[0])
		s1 += float64(v[1]) * float64(v[1])
		s2 += float64(v[2]) * float64(v[2])
		s3 += float64(v[3]) * float64(v[3])
	}
	for j, v := range x[i:] {
		f := float64(v) * float64(v)
		switch j {
		case 0:
			s0 += f
		case 1:
			s1 += f
		default:
			s2 += f
		}
	}
	ss := (s0 + s1) + (s2 + s3)
	r := rsqrt64(ss/float64(len(x)) + float64(eps))
	for i, v := range x {
		y[i] = float32(float64(v) * r * (1 + float64(w[i])))
	}
}

// rmsNorm1p normalises each of rows vectors of D: y = x * rsqrt(mean(x^2) + eps) * (1 + w),
// with the sum of squares in float64 and one rounding per output (the zero-centred RMSNorm of
// qwen3_next and qwen4_exp: Qwen3NextRMSNorm, Qwen4ExpTextRMSNorm). x, y: [rows, D]; w: [D]. y may alias x.
// Parallel over rows. Errors wrap op.ErrShape (or op.ErrInvalidArgument for a negative eps).
func rmsNorm1p(y, x []float32, rows, D int, w []float32, eps float32) error {
	return execRMSNorm(op.RMSNorm{Y: op.HostF32(y), X: op.HostF32(x), Rows: rows, D: D, W: w, Eps: eps})
}

func execRMSNorm(a op.RMSNorm) error {
	if err := a.Check(); err != nil {
		return err
	}
	y, x, rows, D, w, eps := a.Y.F32(), a.X.F32(), a.Rows, a.D, a.W, a.Eps
	parallelFor(rows, max(1, 4096/D), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			rmsScale1p(y[r*D:(r+1)*D], x[r*D:(r+1)*D], w, eps)
		}
	})
	return nil
}

// rmsNorm1pGrouped is the grouped form (group_size = D) used by GatedResidual's hc_norm and
// PLE's norms: x, y [T, S*D]; each of the S streams of D of a token is normalised separately
// with its own weights w[s*D:(s+1)*D] (w has S*D entries). y may alias x.
// Errors wrap op.ErrShape (or op.ErrInvalidArgument for a negative eps).
func rmsNorm1pGrouped(y, x []float32, T, S, D int, w []float32, eps float32) error {
	if T < 0 || S <= 0 || D <= 0 || len(x) != T*S*D || len(y) != T*S*D || len(w) != S*D {
		return fmt.Errorf("RMSNorm1pGrouped: %w: T=%d S=%d D=%d len(x)=%d len(y)=%d len(w)=%d",
			op.ErrShape, T, S, D, len(x), len(y), len(w))
	}
	if !(eps >= 0) {
		return fmt.Errorf("RMSNorm1pGrouped: %w: eps=%g", op.ErrInvalidArgument, eps)
	}
	parallelFor(T*S, max(1, 4096/D), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			s := r % S
			rmsScale1p(y[r*D:(r+1)*D], x[r*D:(r+1)*D], w[s*D:(s+1)*D], eps)
		}
	})
	return nil
}
