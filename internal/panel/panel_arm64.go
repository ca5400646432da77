//go:build arm64 && !purego

package panel

// Advanced SIMD (NEON) is part of every arm64 CPU Go supports: the NEON set always runs. There
// is no wider (SVE) form.
const best = Asm

const asmName, asm512Name = "neon asm", ""

// fmaPanel6 adds to the six rows i < 6 of C (row stride ldc) sum_{j<k} A[i*ars + j*as] * B_j,
// over n columns; B_j is the row b[j] points to; tail is unused. Implemented in
// panel_arm64.s.
//
//go:noescape
func fmaPanel6(c *float32, ldc int, a *float32, ars, as int, b **float32, n, k int, tail *int32)

// fmaPanel1 is fmaPanel6 for one row.
//
//go:noescape
func fmaPanel1(c *float32, a *float32, as int, b **float32, n, k int, tail *int32)

func fmaPanel6x16(c *float32, ldc int, a *float32, ars, as int, b **float32, n, k int) {
	panic("panel: no AVX-512 kernels in this build")
}

func fmaPanel1x16(c *float32, a *float32, as int, b **float32, n, k int) {
	panic("panel: no AVX-512 kernels in this build")
}
