//go:build arm64 && !purego

package kernels

// The element-wise kernels have no arm64 form yet (the panels are NEON: internal/panel).
const hasAsmVec = false

func attnSoftmax8(st *float32, rp, nc int, scale float32, m, l, alpha *float32) {
	panic("kernels: no arm64 softmax kernel")
}

func attnScale8(x *float32, n int, s float32) { panic("kernels: no arm64 scaling kernel") }

func gdnScaleCopy8(dst, src *float32, n int, s float32) {
	panic("kernels: no arm64 scaling kernel")
}

func gdnRHS8(dst, v, ks *float32, n int, b, e float32) {
	panic("kernels: no arm64 element-wise kernel")
}

func gdnConv8(dst *float32, rows **float32, w *float32, k, ws, n int) {
	panic("kernels: no arm64 element-wise kernel")
}

func axpy8(dst, src *float32, n int, w float32) {
	panic("kernels: no arm64 element-wise kernel")
}

func attnScores4x3(st *float32, rp int, q **float32, nq4 int, keys **float32, nk3 int, n int, pf **float32) {
	panic("kernels: no arm64 dot-product kernel")
}
