//go:build !amd64 || purego

package qdot

// bf16Asm has no form in this build: AVX512BF16 is never in its kernel list.
func bf16Asm([]float32, int, *BF16Act, *bsrc, int, int) {
	panic("qdot: no VDPBF16PS kernel in this build")
}
