//go:build amd64 && !purego

package blas

// transpose8 sets dst[j*ldd + i] = src[i*lds + j] for i < 8 and j < k, k a multiple of
// 8 (pack_amd64.s; AVX, which every CPU of the assembly panel sets has).
//
//go:noescape
func transpose8(dst *float32, ldd int, src *float32, lds int, k int)

// addTo8 sets dst[i] += src[i] for i < n, n a multiple of 8 (pack_amd64.s; AVX).
//
//go:noescape
func addTo8(dst, src *float32, n int)

// hasTranspose8: transpose8 and addTo8 exist in this build (they run on the CPUs of the
// assembly panel sets).
const hasTranspose8 = true
