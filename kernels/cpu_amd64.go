//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// hasAVX2FMA reports whether the CPU (and the OS, which must save the YMM state) supports the
// AVX2 and FMA instructions of the element-wise and activation assembly kernels.
var hasAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasAVX

// hasAsmVec: the element-wise kernels (attnSoftmax8, attnScale8, gdnScaleCopy8, gdnRHS8, gdnConv8,
// axpy8) can
// run.
var hasAsmVec = hasAVX2FMA

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

// gdnConv8 sets dst[i] = sum over j < k of w[j*ws+i] * rows[j][i] for i < n, n a multiple of 8:
// from +0, taps in order, each product and sum rounded (gdn_kernel_amd64.s).
//
//go:noescape
func gdnConv8(dst *float32, rows **float32, w *float32, k, ws, n int)

// axpy8 sets dst[i] = dst[i] + w*src[i] for i < n, n a multiple of 8, the product and the sum
// each rounded (gdn_kernel_amd64.s).
//
//go:noescape
func axpy8(dst, src *float32, n int, w float32)

// attnScores4x3 writes st[c*rp + r] = q_r . k_c (n floats, n a positive multiple of 8) for the
// 4*nq4 query rows and 3*nk3 key rows of the tables q and keys, prefetching the 3*nk3 rows of
// pf on the way (attention_kernel_amd64.s).
//
//go:noescape
func attnScores4x3(st *float32, rp int, q **float32, nq4 int, keys **float32, nk3 int, n int, pf **float32)
