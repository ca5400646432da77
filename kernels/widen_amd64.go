//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// hasWidenAsm: widenBF16x16 needs AVX2 (vpmovzxwd, vpslld on YMM).
var hasWidenAsm = cpu.X86.HasAVX2 && cpu.X86.HasAVX

// widenBF16x16 widens n bfloat16 values at src to float32 at dst, n a multiple of 16: each is
// its 16 bits shifted into the top half of a float32, the exact value (widen_amd64.s).
//
//go:noescape
func widenBF16x16(dst *float32, src *uint16, n int)
