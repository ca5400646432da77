//go:build amd64 && !purego

package kernels

// hasAsmAct: the AVX2+FMA activation kernels of act_amd64.s can run.
var hasAsmAct = hasAVX2FMA

// actSigmoid8 sets dst[i] = sigmoid(src[i] / div), i < n, n a multiple of 8 (act_amd64.s).
//
//go:noescape
func actSigmoid8(dst, src *float32, n int, div float32)

// actSiLU8 sets dst[i] = v * sigmoid(v), v = src[i] / div, i < n, n a multiple of 8.
//
//go:noescape
func actSiLU8(dst, src *float32, n int, div float32)

// actSigmoidMul8 sets o[i] *= sigmoid(gate[i]), i < n, n a multiple of 8.
//
//go:noescape
func actSigmoidMul8(o, gate *float32, n int)

// actSwiGLU8 sets h[i] = silu(gate[i]) * u[i], i < n, n a multiple of 8.
//
//go:noescape
func actSwiGLU8(h, gate, u *float32, n int)

// actGRMean8 sets x[d] = (sum_{s<S} sigmoid(a[s*D+d]) * h[s*D+d]) / fS, d < n, n a multiple
// of 8, S >= 1.
//
//go:noescape
func actGRMean8(x, a, h *float32, D, S, n int, fS float32)
