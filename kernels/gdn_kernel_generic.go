//go:build !goexperiment.simd || !amd64

package kernels

// gdnRowMulAdd adds sum_j coef[j] * X[j, :] to dst (X row-major, rows of n = len(dst)); the
// inner product of every chunked-scan matrix product. This build has no vector kernel.
func gdnRowMulAdd(dst, coef, X []float32, n int) { gdnRowMulAddGo(dst, coef, X, n) }
