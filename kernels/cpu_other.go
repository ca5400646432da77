//go:build (!amd64 && !arm64) || purego

package kernels

// This build has no assembly micro-kernels.
const hasAsmPanels, hasAsmVec, hasAsm512 = false, false, false

const cpuAsmName, cpuAsm512Name = "", ""

func fmaPanel6(c *float32, ldc int, a *float32, ars, as int, b **float32, n, k int, tail *int32) {
	panic("kernels: no assembly micro-kernels in this build")
}

func fmaPanel1(c *float32, a *float32, as int, b **float32, n, k int, tail *int32) {
	panic("kernels: no assembly micro-kernels in this build")
}

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

func fmaPanel6x16(c *float32, ldc int, a *float32, ars, as int, b **float32, n, k int) {
	panic("kernels: no AVX-512 kernels in this build")
}

func fmaPanel1x16(c *float32, a *float32, as int, b **float32, n, k int) {
	panic("kernels: no AVX-512 kernels in this build")
}
