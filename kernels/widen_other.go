//go:build !amd64 || purego

package kernels

// This build has no assembly widening kernel.
const hasWidenAsm = false

func widenBF16x16(dst *float32, src *uint16, n int) {
	panic("kernels: no assembly widening kernel in this build")
}
