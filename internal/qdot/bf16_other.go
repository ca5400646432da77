//go:build !amd64 || purego

package qdot

// b16AVX512 has no form in this build: AVX512BF16 is never in its kernel list.
func b16AVX512(*b16args) { panic("qdot: no VDPBF16PS kernel in this build") }
