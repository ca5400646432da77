//go:build arm64 && !purego

package kernels

// Advanced SIMD (NEON) is part of every arm64 CPU Go supports: the panel kernels always run.
// The element-wise kernels have no arm64 form yet.
// There is no wider (SVE) form of the panels.
const hasAsmPanels, hasAsmVec, hasAsm512 = true, false, false

// cpuAsmName names the assembly kernels of this architecture.
const cpuAsmName, cpuAsm512Name = "neon asm", ""

// fmaPanel6 adds to the six rows i < 6 of C (row stride ldc) sum_{j<k} A[i*ars + j*as] * B_j,
// over n columns; B_j is the row b[j] points to; tail is unused. Implemented in
// cpu_fma_arm64.s.
//
//go:noescape
func fmaPanel6(c *float32, ldc int, a *float32, ars, as int, b **float32, n, k int, tail *int32)

// fmaPanel1 is fmaPanel6 for one row.
//
//go:noescape
func fmaPanel1(c *float32, a *float32, as int, b **float32, n, k int, tail *int32)

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

func fmaPanel6x16(c *float32, ldc int, a *float32, ars, as int, b **float32, n, k int) {
	panic("kernels: no AVX-512 kernels in this build")
}

func fmaPanel1x16(c *float32, a *float32, as int, b **float32, n, k int) {
	panic("kernels: no AVX-512 kernels in this build")
}
