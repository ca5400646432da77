//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// hasAVX2FMA reports whether the CPU (and the OS, which must save the YMM state) supports the
// AVX2 and FMA instructions of the assembly micro-kernels.
var hasAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasAVX

// hasAsmPanels: the panel kernels fmaPanel6/fmaPanel1 can run; hasAsmVec: so can the
// element-wise kernels (attnSoftmax8, attnScale8, gdnScaleCopy8, gdnRHS8).
var hasAsmPanels, hasAsmVec = hasAVX2FMA, hasAVX2FMA

// hasAsm512: the AVX-512F panel kernels fmaPanel6x16/fmaPanel1x16 can run (x/sys/cpu also
// checks that the OS saves the ZMM and opmask state).
var hasAsm512 = hasAVX2FMA && cpu.X86.HasAVX512F

// cpuAsmName names the assembly kernels of this architecture; cpuAsm512Name the set whose
// panel kernels are the AVX-512F forms.
const cpuAsmName, cpuAsm512Name = "avx2-fma asm", "avx512 asm"

// fmaPanel6 adds to the six rows i < 6 of C (row stride ldc) sum_{j<k} A[i*ars + j*as] * B_j,
// over n columns; B_j is the row b[j] points to. tail masks the last n%8 columns. Implemented
// in cpu_fma_amd64.s.
//
//go:noescape
func fmaPanel6(c *float32, ldc int, a *float32, ars, as int, b **float32, n, k int, tail *int32)

// fmaPanel1 is fmaPanel6 for one row.
//
//go:noescape
func fmaPanel1(c *float32, a *float32, as int, b **float32, n, k int, tail *int32)

// fmaPanel6x16 is fmaPanel6 in AVX-512F (16 lanes, the last n%16 columns under an opmask),
// bitwise the same results. Implemented in cpu_avx512_amd64.s.
//
//go:noescape
func fmaPanel6x16(c *float32, ldc int, a *float32, ars, as int, b **float32, n, k int)

// fmaPanel1x16 is fmaPanel6x16 for one row.
//
//go:noescape
func fmaPanel1x16(c *float32, a *float32, as int, b **float32, n, k int)

// attnSoftmax8 is the online-softmax step of 8 score rows (attention_kernel_amd64.s).
//
//go:noescape
func attnSoftmax8(st *float32, rp, nc int, scale float32, m, l, alpha *float32)

// attnScale8 multiplies x[0:n] by s, n a multiple of 8 (attention_kernel_amd64.s).
//
//go:noescape
func attnScale8(x *float32, n int, s float32)

// gdnScaleCopy8 sets dst = s*src over n elements, n a multiple of 8 (gdn_kernel_amd64.s).
//
//go:noescape
func gdnScaleCopy8(dst, src *float32, n int, s float32)

// gdnRHS8 sets dst = b*(v - e*ks) over n elements, n a multiple of 8 (gdn_kernel_amd64.s).
//
//go:noescape
func gdnRHS8(dst, v, ks *float32, n int, b, e float32)
