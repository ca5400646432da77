package kernels

import "github.com/stratakernels/strata/internal/panel"

// CPU micro-kernels shared by the GDN chunked scan and attention: package internal/panel's
// blocked "C += A B" whose B rows are reached through a table of row pointers (so attention
// can read cache rows picked by a selection without copying them). Every output element
// accumulates its k terms in index order, one fused multiply-add per term in the assembly
// kernels and a multiply and an add in the portable ones (which the compiler may fuse where
// FMA is part of the base instruction set, e.g. arm64 or GOAMD64=v3); the tiling never changes
// that order, so a result does not depend on which tile, tail or worker computed it. The two
// kernel sets round differently, so results are bitwise reproducible per build and CPU
// feature set, not across them.

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

func cpuKernelName() string { return panelSet().String() }

// hasAsmPanels: the assembly panel kernels (AVX2+FMA or NEON) run on this CPU and build;
// hasAsm512: so do their AVX-512F forms.
var hasAsmPanels, hasAsm512 = panel.Best() >= panel.Asm, panel.Best() >= panel.Asm512

// cpuAsmName names the assembly kernels of this architecture ("avx2-fma asm", "neon asm"),
// cpuAsm512Name the set whose panel kernels are the AVX-512F forms.
var cpuAsmName, cpuAsm512Name = panel.Asm.String(), panel.Asm512.String()

// panelSet is the panel kernel set that useAsm and useAsm512 select.
func panelSet() panel.Set {
	switch {
	case !useAsm:
		return panel.Generic
	case useAsm512:
		return panel.Asm512
	}
	return panel.Asm
}

// fmaRowTable points dst[j] at x[j*stride] for j < len(dst), rows of n elements (panel.RowTable).
func fmaRowTable(dst []*float32, x []float32, stride, n int) { panel.RowTable(dst, x, stride, n) }

// fmaGemm adds to C [m, n] (row stride ldc) the product A B: C[i, d] += sum_{j<k} A[i*ars +
// j*as] * B_j[d], B_j = *b[j] a row of at least n elements (see fmaRowTable). A is read with
// element strides (ars along rows, as along j), so a transposed A needs no copy (panel.Gemm).
func fmaGemm(c []float32, ldc int, a []float32, ars, as int, b []*float32, m, n, k int) {
	panel.Gemm(panelSet(), c, ldc, a, ars, as, b, m, n, k)
}

// fmaRow is fmaGemm for one row: c[d] += sum_{j<len(b)} a[j*as] * B_j[d], d < len(c).
func fmaRow(c, a []float32, as int, b []*float32) { panel.Row(panelSet(), c, a, as, b) }
