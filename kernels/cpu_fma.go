package kernels

import "unsafe"

// CPU micro-kernels shared by the GDN chunked scan and attention: a blocked "C += A B" whose
// B rows are reached through a table of row pointers (so attention can read cache rows picked
// by a selection without copying them). Every output element accumulates its k terms in index
// order, one fused multiply-add per term in the assembly kernels and a multiply and an add in
// the portable ones (which the compiler may fuse where FMA is part of the base instruction
// set, e.g. arm64 or GOAMD64=v3); the tiling never changes that order, so a result does not depend on
// which tile, tail or worker computed it. The two kernel sets round differently, so results
// are bitwise reproducible per build and CPU feature set, not across them.

// useAsm selects the assembly micro-kernels (AVX2+FMA on amd64 CPUs that have them, NEON on
// arm64); the tests turn it off to run the portable kernels on the same machine. The
// element-wise kernels (vector softmax, scaling) exist on amd64 only (hasAsmVec); arm64 runs
// their portable forms next to its NEON panels.
var useAsm = hasAsmPanels

// useAsm512 selects, when useAsm is set, the AVX-512F forms of the panel kernels (amd64 CPUs
// with AVX-512F); they compute every element with the same fused multiply-adds in the same
// order as the AVX2 forms, so the two sets give bitwise the same results. The tests turn it
// off to run the AVX2 set on the same machine.
var useAsm512 = hasAsm512

// useAsmVec reports whether the element-wise assembly kernels run.
func useAsmVec() bool { return useAsm && hasAsmVec }

// GDNKernel names the micro-kernels GDNScan runs in this build on this CPU: "avx512 asm"
// (AVX-512F panels beside the AVX2+FMA element-wise kernels, amd64 CPUs with AVX-512F),
// "avx2-fma asm" (AVX2+FMA assembly, amd64), "neon asm" (arm64) or "generic Go" (portable code: amd64 CPUs
// without AVX2/FMA, other architectures, builds with the purego tag).
func GDNKernel() string { return cpuKernelName() }

// AttentionKernel names the micro-kernels Attention runs in this build on this CPU, with the
// same names as GDNKernel.
func AttentionKernel() string { return cpuKernelName() }

func cpuKernelName() string {
	if useAsm {
		if useAsm512 {
			return cpuAsm512Name
		}
		return cpuAsmName
	}
	return "generic Go"
}

// fmaTailMask holds the lane masks of the assembly kernels' last n%8 columns: the eight
// entries from fmaTailMask[8-r] have their first r lanes set.
var fmaTailMask = [16]int32{-1, -1, -1, -1, -1, -1, -1, -1}

// fmaRowTable points dst[j] at x[j*stride] for j < len(dst), rows of n elements; it panics
// (index out of range) if the last row does not fit in x, which keeps the unchecked loads of
// the kernels inside x.
func fmaRowTable(dst []*float32, x []float32, stride, n int) {
	if len(dst) == 0 || n == 0 {
		return
	}
	_ = x[(len(dst)-1)*stride+n-1]
	for j := range dst {
		dst[j] = &x[j*stride]
	}
}

// fmaGemm adds to C [m, n] (row stride ldc) the product A B: C[i, d] += sum_{j<k} A[i*ars +
// j*as] * B_j[d], B_j = *b[j] a row of at least n elements (see fmaRowTable). A is read with
// element strides (ars along rows, as along j), so a transposed A needs no copy.
func fmaGemm(c []float32, ldc int, a []float32, ars, as int, b []*float32, m, n, k int) {
	if m <= 0 || n <= 0 || k <= 0 {
		return
	}
	_ = c[(m-1)*ldc+n-1]
	_ = a[(m-1)*ars+(k-1)*as]
	_ = b[k-1]
	if !useAsm {
		for i := 0; i < m; i++ {
			fmaRowGo(c[i*ldc:i*ldc+n], a[i*ars:], as, b[:k])
		}
		return
	}
	i := 0
	if useAsm512 {
		for ; i+6 <= m; i += 6 {
			fmaPanel6x16(&c[i*ldc], ldc, &a[i*ars], ars, as, &b[0], n, k)
		}
		for ; i < m; i++ {
			fmaPanel1x16(&c[i*ldc], &a[i*ars], as, &b[0], n, k)
		}
		return
	}
	tail := &fmaTailMask[8-n%8]
	for ; i+6 <= m; i += 6 {
		fmaPanel6(&c[i*ldc], ldc, &a[i*ars], ars, as, &b[0], n, k, tail)
	}
	for ; i < m; i++ {
		fmaPanel1(&c[i*ldc], &a[i*ars], as, &b[0], n, k, tail)
	}
}

// fmaRow is fmaGemm for one row: c[d] += sum_{j<len(b)} a[j*as] * B_j[d], d < len(c).
func fmaRow(c, a []float32, as int, b []*float32) {
	k, n := len(b), len(c)
	if k == 0 || n == 0 {
		return
	}
	_ = a[(k-1)*as]
	if !useAsm {
		fmaRowGo(c, a, as, b)
		return
	}
	if useAsm512 {
		fmaPanel1x16(&c[0], &a[0], as, &b[0], n, k)
		return
	}
	fmaPanel1(&c[0], &a[0], as, &b[0], n, k, &fmaTailMask[8-n%8])
}

// fmaRowGo is the portable row kernel: columns in register blocks of 8, terms in index order.
func fmaRowGo(c, a []float32, as int, b []*float32) {
	n := len(c)
	d := 0
	for ; d+8 <= n; d += 8 {
		cc := c[d : d+8 : d+8]
		s0, s1, s2, s3, s4, s5, s6, s7 := cc[0], cc[1], cc[2], cc[3], cc[4], cc[5], cc[6], cc[7]
		for j, row := range b {
			aj := a[j*as]
			x := (*[8]float32)(unsafe.Add(unsafe.Pointer(row), d*4))
			s0 += aj * x[0]
			s1 += aj * x[1]
			s2 += aj * x[2]
			s3 += aj * x[3]
			s4 += aj * x[4]
			s5 += aj * x[5]
			s6 += aj * x[6]
			s7 += aj * x[7]
		}
		cc[0], cc[1], cc[2], cc[3], cc[4], cc[5], cc[6], cc[7] = s0, s1, s2, s3, s4, s5, s6, s7
	}
	for ; d < n; d++ {
		s := c[d]
		for j, row := range b {
			s += a[j*as] * *(*float32)(unsafe.Add(unsafe.Pointer(row), d*4))
		}
		c[d] = s
	}
}
