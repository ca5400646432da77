//go:build amd64 && !purego

package qdot

// The AVX2 kernels of activation quantization (act_amd64.s), used by quantBlock where the CPU
// has AVX2: bitwise the portable loop's results.

//go:noescape
func amaxBitsAVX2(x *float32, n int) uint32

//go:noescape
func codesAVX2(q *int8, x *float32, n int, inv float64) int32

//go:noescape
func roundBF16AVX2(dst *uint16, src *float32, n int)

var hasQuantAsm = hasAVX2
