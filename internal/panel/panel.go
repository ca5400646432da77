// Package panel holds strata's CPU panel micro-kernels: a blocked single-precision "C += A B"
// whose B rows are reached through a table of row pointers (so a caller can multiply rows
// picked from a cache, or the rows of a packed block, without copying them) and whose A is read
// with element strides (so a transposed A needs no copy). Package kernels runs its GDN chunked
// scan and attention products on it, package internal/blas its blocked SGEMM.
//
// Kernel sets: AVX-512F (amd64 CPUs with AVX-512F: 6 rows x 64/48/32/16 columns, one row x
// 128/64/16, the last n%16 columns under an opmask), AVX2+FMA (amd64 CPUs with AVX2 and FMA:
// 6 rows x 16/8 columns, one row x 32/8, the last n%8 under a lane mask), NEON (every arm64
// CPU: 6 rows x 8/4 columns, one row x 16/4, then single columns) and portable Go (other CPUs
// and architectures, builds with the purego tag). The caller names the set of every call, so
// tests can run each set the machine has side by side.
//
// Order of the sums. Every output element accumulates its k terms in index order onto its
// value in C, one fused multiply-add per term in the assembly sets (c = fma(a_j, b_j, c), j =
// 0, 1, ..., k-1) and a multiply and an add in the portable set (which the compiler may fuse
// where FMA is part of the base instruction set, e.g. arm64 or GOAMD64=v3). The tiling never
// changes that order, so a result does not depend on which tile, tail or worker computed it,
// and a product split along k into calls that each add onto C gives the bits of one call.
// The AVX-512F and AVX2+FMA sets give bitwise the same results; the portable set rounds
// differently, so results are bitwise reproducible per build and kernel set, not across them.
package panel

import (
	"fmt"
	"unsafe"
)

// Set is one kernel set. The sets are ordered: a CPU that runs a set runs every smaller one.
type Set uint8

const (
	// Generic is the portable Go set, run everywhere.
	Generic Set = iota
	// Asm is the assembly set: AVX2+FMA on amd64, NEON on arm64.
	Asm
	// Asm512 is the AVX-512F set (amd64); it gives bitwise the results of Asm.
	Asm512
)

// String names the set as the kernels report it: "generic Go", "avx2-fma asm", "neon asm",
// "avx512 asm"; "" for a set this architecture or build has no form of.
func (s Set) String() string {
	switch s {
	case Generic:
		return "generic Go"
	case Asm:
		return asmName
	case Asm512:
		return asm512Name
	}
	return fmt.Sprintf("Set(%d)", uint8(s))
}

// Best is the fastest set this build runs on this CPU.
func Best() Set { return best }

// Sets lists the sets this build runs on this CPU, fastest first (Generic last).
func Sets() []Set {
	var out []Set
	for s := best; ; s-- {
		out = append(out, s)
		if s == Generic {
			return out
		}
	}
}

// check panics when s is not a set this CPU runs (its instructions would fault).
func check(s Set) {
	if s > best {
		panic(fmt.Sprintf("panel: kernel set %v not available on this CPU and build (best %v)", s, best))
	}
}

// tailMask holds the lane masks of the AVX2 kernels' last n%8 columns: the eight entries from
// tailMask[8-r] have their first r lanes set.
var tailMask = [16]int32{-1, -1, -1, -1, -1, -1, -1, -1}

// RowTable points dst[j] at x[j*stride] for j < len(dst), rows of n elements; it panics (index
// out of range) if the last row does not fit in x, which keeps the unchecked loads of the
// kernels inside x.
func RowTable(dst []*float32, x []float32, stride, n int) {
	if len(dst) == 0 || n == 0 {
		return
	}
	_ = x[(len(dst)-1)*stride+n-1]
	for j := range dst {
		dst[j] = &x[j*stride]
	}
}

// Gemm adds to C [m, n] (row stride ldc) the product A B with set s: C[i, d] += sum_{j<k}
// A[i*ars + j*as] * B_j[d], B_j = *b[j] a row of at least n elements (see RowTable). A is read
// with element strides (ars along rows, as along j), so a transposed A needs no copy. m, n or
// k <= 0 leaves C as it is. It panics when s is a set this CPU does not run or a matrix does
// not fit its slice.
func Gemm(s Set, c []float32, ldc int, a []float32, ars, as int, b []*float32, m, n, k int) {
	if m <= 0 || n <= 0 || k <= 0 {
		return
	}
	check(s)
	_ = c[(m-1)*ldc+n-1]
	_ = a[(m-1)*ars+(k-1)*as]
	_ = b[k-1]
	switch s {
	case Generic:
		for i := 0; i < m; i++ {
			rowGo(c[i*ldc:i*ldc+n], a[i*ars:], as, b[:k])
		}
	case Asm512:
		i := 0
		for ; i+6 <= m; i += 6 {
			fmaPanel6x16(&c[i*ldc], ldc, &a[i*ars], ars, as, &b[0], n, k)
		}
		for ; i < m; i++ {
			fmaPanel1x16(&c[i*ldc], &a[i*ars], as, &b[0], n, k)
		}
	default:
		tail := &tailMask[8-n%8]
		i := 0
		for ; i+6 <= m; i += 6 {
			fmaPanel6(&c[i*ldc], ldc, &a[i*ars], ars, as, &b[0], n, k, tail)
		}
		for ; i < m; i++ {
			fmaPanel1(&c[i*ldc], &a[i*ars], as, &b[0], n, k, tail)
		}
	}
}

// Row is Gemm for one row: c[d] += sum_{j<len(b)} a[j*as] * B_j[d], d < len(c).
func Row(s Set, c, a []float32, as int, b []*float32) {
	k, n := len(b), len(c)
	if k == 0 || n == 0 {
		return
	}
	check(s)
	_ = a[(k-1)*as]
	switch s {
	case Generic:
		rowGo(c, a, as, b)
	case Asm512:
		fmaPanel1x16(&c[0], &a[0], as, &b[0], n, k)
	default:
		fmaPanel1(&c[0], &a[0], as, &b[0], n, k, &tailMask[8-n%8])
	}
}

// rowGo is the portable row kernel: columns in register blocks of 8, terms in index order.
func rowGo(c, a []float32, as int, b []*float32) {
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
