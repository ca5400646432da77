//go:build (!amd64 && !arm64) || purego

package panel

// This build has no assembly kernels.
const best = Generic

const asmName, asm512Name = "", ""

func fmaPanel6(c *float32, ldc int, a *float32, ars, as int, b **float32, n, k int, tail *int32) {
	panic("panel: no assembly kernels in this build")
}

func fmaPanel1(c *float32, a *float32, as int, b **float32, n, k int, tail *int32) {
	panic("panel: no assembly kernels in this build")
}

func fmaPanel6x16(c *float32, ldc int, a *float32, ars, as int, b **float32, n, k int) {
	panic("panel: no assembly kernels in this build")
}

func fmaPanel1x16(c *float32, a *float32, as int, b **float32, n, k int) {
	panic("panel: no assembly kernels in this build")
}
