//go:build goexperiment.simd

package kernels

import "simd/archsimd"

// gdnSIMD selects the AVX2+FMA kernel. Builds with GOEXPERIMENT=simd on such CPUs use it;
// its fused multiply-adds round differently from the portable kernel, so results are
// bitwise reproducible per build and CPU feature set, not across them.
var gdnSIMD = archsimd.X86.AVX2() && archsimd.X86.FMA()

// gdnRowMulAdd adds sum_j coef[j] * X[j, :] to dst (X row-major, rows of n = len(dst)); the
// inner product of every chunked-scan matrix product. Columns go in blocks of 32 (four 8-wide
// accumulators), then 8, then scalars; j ascending inside each block, one FMA per term.
func gdnRowMulAdd(dst, coef, X []float32, n int) {
	if !gdnSIMD {
		gdnRowMulAddGo(dst, coef, X, n)
		return
	}
	kd := len(coef)
	if kd == 0 {
		return
	}
	dst = dst[:n]
	X = X[:kd*n]
	d := 0
	for ; d+32 <= n; d += 32 {
		s0 := archsimd.LoadFloat32x8Slice(dst[d:])
		s1 := archsimd.LoadFloat32x8Slice(dst[d+8:])
		s2 := archsimd.LoadFloat32x8Slice(dst[d+16:])
		s3 := archsimd.LoadFloat32x8Slice(dst[d+24:])
		off := d
		for _, a := range coef {
			av := archsimd.BroadcastFloat32x8(a)
			x := X[off : off+32 : off+32]
			s0 = av.MulAdd(archsimd.LoadFloat32x8Slice(x[0:8]), s0)
			s1 = av.MulAdd(archsimd.LoadFloat32x8Slice(x[8:16]), s1)
			s2 = av.MulAdd(archsimd.LoadFloat32x8Slice(x[16:24]), s2)
			s3 = av.MulAdd(archsimd.LoadFloat32x8Slice(x[24:32]), s3)
			off += n
		}
		s0.StoreSlice(dst[d:])
		s1.StoreSlice(dst[d+8:])
		s2.StoreSlice(dst[d+16:])
		s3.StoreSlice(dst[d+24:])
	}
	for ; d+8 <= n; d += 8 {
		s0 := archsimd.LoadFloat32x8Slice(dst[d:])
		off := d
		for _, a := range coef {
			s0 = archsimd.BroadcastFloat32x8(a).MulAdd(archsimd.LoadFloat32x8Slice(X[off:off+8:off+8]), s0)
			off += n
		}
		s0.StoreSlice(dst[d:])
	}
	for ; d < n; d++ {
		s := dst[d]
		for j, a := range coef {
			s += a * X[j*n+d]
		}
		dst[d] = s
	}
	// Leave no dirty upper YMM state behind: legacy-SSE code that follows (math.Exp's assembly,
	// scalar Go float code) would otherwise pay a merge penalty on every instruction.
	archsimd.ClearAVXUpperBits()
}
