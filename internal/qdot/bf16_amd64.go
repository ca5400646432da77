//go:build amd64 && !purego

package qdot

// b16AVX512 is the VDPBF16PS kernel (bf16_amd64.s): one 6-row tile by one 32-column panel.
//
//go:noescape
func b16AVX512(a *b16args)
