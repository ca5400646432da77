//go:build (!amd64 && !arm64) || purego

package kernels

// This build has no assembly element-wise kernels.
const hasAsmVec = false

func attnSoftmax8(st *float32, rp, nc int, scale float32, m, l, alpha *float32) {
	panic("kernels: no assembly micro-kernels in this build")
}

func attnScale8(x *float32, n int, s float32) {
	panic("kernels: no assembly micro-kernels in this build")
}

func gdnScaleCopy8(dst, src *float32, n int, s float32) {
	panic("kernels: no assembly micro-kernels in this build")
}

func gdnRHS8(dst, v, ks *float32, n int, b, e float32) {
	panic("kernels: no assembly micro-kernels in this build")
}

func gdnConv8(dst *float32, rows **float32, w *float32, k, ws, n int) {
	panic("kernels: no assembly micro-kernels in this build")
}

func axpy8(dst, src *float32, n int, w float32) {
	panic("kernels: no assembly micro-kernels in this build")
}

func attnScores4x3(st *float32, rp int, q **float32, nq4 int, keys **float32, nk3 int, n int, pf **float32) {
	panic("kernels: no assembly micro-kernels in this build")
}
