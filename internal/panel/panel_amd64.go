//go:build amd64 && !purego

package panel

import "golang.org/x/sys/cpu"

// best: Asm needs AVX2 and FMA (and an OS that saves the YMM state), Asm512 also AVX-512F
// (x/sys/cpu checks that the OS saves the ZMM and opmask state).
var best = func() Set {
	switch {
	case !(cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasAVX):
		return Generic
	case cpu.X86.HasAVX512F:
		return Asm512
	}
	return Asm
}()

const asmName, asm512Name = "avx2-fma asm", "avx512 asm"

// fmaPanel6 adds to the six rows i < 6 of C (row stride ldc) sum_{j<k} A[i*ars + j*as] * B_j,
// over n columns; B_j is the row b[j] points to. tail masks the last n%8 columns. Implemented
// in panel_amd64.s.
//
//go:noescape
func fmaPanel6(c *float32, ldc int, a *float32, ars, as int, b **float32, n, k int, tail *int32)

// fmaPanel1 is fmaPanel6 for one row.
//
//go:noescape
func fmaPanel1(c *float32, a *float32, as int, b **float32, n, k int, tail *int32)

// fmaPanel6x16 is fmaPanel6 in AVX-512F (16 lanes, the last n%16 columns under an opmask),
// bitwise the same results. Implemented in panel_avx512_amd64.s.
//
//go:noescape
func fmaPanel6x16(c *float32, ldc int, a *float32, ars, as int, b **float32, n, k int)

// fmaPanel1x16 is fmaPanel6x16 for one row.
//
//go:noescape
func fmaPanel1x16(c *float32, a *float32, as int, b **float32, n, k int)
