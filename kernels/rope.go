package kernels

import (
	"github.com/stratakernels/strata/op"

	"fmt"
	"math"
)

// rope applies rotary position embedding in place to x [T, H, d] (token-major heads), token t
// at position pos0+t: the first rot dims of every head rotate with rotate_half pairing
// (j, j+rot/2), j < rot/2; dims rot..d-1 pass through (partial rotary, rot = 64 of 256 in both
// models). inv_freq_j = theta^(-2j/rot); angle = pos*inv_freq_j; for j < rot/2:
//
//	x'[j]       = x[j]*cos - x[j+rot/2]*sin
//	x'[j+rot/2] = x[j+rot/2]*cos + x[j]*sin
//
// (transformers' apply_rotary_pos_emb with rotate_half; qwen4_exp's interleaved mrope reduces
// to this for text). Angles, cos, sin and the rotation are evaluated in float64 and rounded
// once, which matches the float64 reference more closely than torch's fp32 path.
// Parallel over tokens. Errors wrap op.ErrShape or op.ErrInvalidArgument (odd or out-of-range rot, negative pos0,
// theta <= 0).
func rope(x []float32, T, H, d, rot, pos0 int, theta float64) error {
	if err := ropeCheck("RoPE", x, T, H, d, rot, theta); err != nil {
		return err
	}
	if pos0 < 0 || pos0 > math.MaxInt32 {
		return fmt.Errorf("RoPE: %w: pos0=%d", op.ErrInvalidArgument, pos0)
	}
	ropeRunNorm(x, T, H, d, rot, theta, func(t int) float64 { return float64(pos0 + t) }, nil, 0)
	return nil
}

// ropeAt is RoPE with one position per row: x [n, H, d], row i at pos[i] (len(pos) = n,
// every pos >= 0). Errors wrap op.ErrShape or op.ErrInvalidArgument.
func ropeAt(x []float32, n, H, d, rot int, pos []int32, theta float64) error {
	if err := ropeCheck("RoPEAt", x, n, H, d, rot, theta); err != nil {
		return err
	}
	if len(pos) != n {
		return fmt.Errorf("RoPEAt: %w: %d positions for %d rows", op.ErrShape, len(pos), n)
	}
	for i, p := range pos {
		if p < 0 {
			return fmt.Errorf("RoPEAt: %w: pos[%d]=%d", op.ErrInvalidArgument, i, p)
		}
	}
	ropeRunNorm(x, n, H, d, rot, theta, func(t int) float64 { return float64(pos[t]) }, nil, 0)
	return nil
}

func ropeCheck(opName string, x []float32, T, H, d, rot int, theta float64) error {
	if T < 0 || H <= 0 || d <= 0 || len(x) != T*H*d {
		return fmt.Errorf("%s: %w: T=%d H=%d d=%d len(x)=%d", opName, op.ErrShape, T, H, d, len(x))
	}
	if rot <= 0 || rot > d || rot%2 != 0 {
		return fmt.Errorf("%s: %w: rot=%d with d=%d (want even, 0 < rot <= d)", opName, op.ErrInvalidArgument, rot, d)
	}
	if !(theta > 0) || math.IsInf(theta, 0) {
		return fmt.Errorf("%s: %w: theta=%g", opName, op.ErrInvalidArgument, theta)
	}
	return nil
}

// ropeRunNorm rotates every head of x; with norm != nil each head is first normalised in place
// by rmsScale1p (the fused RMSNorm1pRoPE), while it is in cache.
func ropeRunNorm(x []float32, T, H, d, rot int, theta float64, pos func(t int) float64, norm []float32, eps float32) {
	half := rot / 2
	invFreq := make([]float64, half)
	for j := range invFreq {
		invFreq[j] = math.Pow(theta, -float64(2*j)/float64(rot))
	}
	parallelFor(T, 4, func(lo, hi int) {
		cs := make([]float64, 2*half)
		for t := lo; t < hi; t++ {
			p := pos(t)
			for j := 0; j < half; j++ {
				cs[2*j], cs[2*j+1] = math.Cos(p*invFreq[j]), math.Sin(p*invFreq[j])
			}
			for h := 0; h < H; h++ {
				if norm != nil {
					rmsScale1p(x[(t*H+h)*d:(t*H+h+1)*d], x[(t*H+h)*d:(t*H+h+1)*d], norm, eps)
				}
				v := x[(t*H+h)*d : (t*H+h)*d+rot]
				for j := 0; j < half; j++ {
					c, s := cs[2*j], cs[2*j+1]
					a, b := float64(v[j]), float64(v[j+half])
					v[j] = float32(a*c - b*s)
					v[j+half] = float32(b*c + a*s)
				}
			}
		}
	})
}

// rmsNorm1pRoPE is RMSNorm1p over each head of x [T, H, d] (weights w [d]) followed by RoPE
// at positions pos0+t, in one pass over x (the q_norm/k_norm + rotary step of the attention
// layers, and the indexer's query). In place; bitwise equal to RMSNorm1p then RoPE.
// Errors wrap op.ErrShape or op.ErrInvalidArgument as those two do.
func rmsNorm1pRoPE(x []float32, T, H, d int, w []float32, eps float32, rot, pos0 int, theta float64) error {
	if err := ropeCheck("RMSNorm1pRoPE", x, T, H, d, rot, theta); err != nil {
		return err
	}
	if len(w) != d || !(eps >= 0) {
		return fmt.Errorf("RMSNorm1pRoPE: %w: len(w)=%d d=%d eps=%g", op.ErrShape, len(w), d, eps)
	}
	if pos0 < 0 || pos0 > math.MaxInt32 {
		return fmt.Errorf("RMSNorm1pRoPE: %w: pos0=%d", op.ErrInvalidArgument, pos0)
	}
	ropeRunNorm(x, T, H, d, rot, theta, func(t int) float64 { return float64(pos0 + t) }, w, eps)
	return nil
}
