package blas

import (
	"sync"

	"github.com/stratakernels/strata/internal/panel"
)

// strataBackend is strata's own blocked SGEMM on the panel kernels of package internal/panel
// (AVX-512F, AVX2+FMA, NEON or portable Go; set names the one it runs).
//
// Structure. op(B) is packed, alpha times its values, into blocks of gemmKC rows (k) by
// gemmNC columns, row-major with a padded row stride (packing transposes a transB operand, so
// the product y = x W^T of a linear layer reads W once per call); the panel kernel then adds
// op(A) times the block onto C, six rows of C per register tile, sweeping the block's columns
// while the six rows of A it broadcasts stay in L1 and the block stays in L2. op(A) is read in
// place: the kernel takes its element strides, so a transposed A costs nothing. C is first
// scaled by beta (set to zero when beta is 0, whatever it held).
//
// Order of the sums. Every element of C is one chain of fused multiply-adds (one multiply and
// one add in the portable set) c = c + a_p * (alpha b_p) over p = 0, 1, ..., k-1 in index
// order, starting from beta*C, whatever the block, tile, tail or caller's split: results are
// bitwise reproducible, independent of the shape of the product around an element (a row of
// C has the same bits whatever m), and AVX-512F and AVX2+FMA give the same bits. The portable
// set rounds differently (see internal/panel).
type strataBackend struct{ set panel.Set }

func (s strataBackend) name() string { return "strata " + s.set.String() }

// concurrent: each call runs on its caller's goroutine with its own packing buffer.
func (strataBackend) concurrent() bool { return true }

// Block sizes of the packed op(B): gemmKC rows (k) by gemmNC columns, 256 KiB of float32,
// which stays in the L2 of the CPUs in use (512 KiB to 2 MiB per core) beside the six rows of
// A and C in flight. They change speed only, never the results.
const (
	gemmKC = 256
	gemmNC = 256
	// gemmMR is the rows of C per panel call: one six-row register tile.
	gemmMR = 6
	// gemmPad pads a packed row past its columns, keeping rows 64-byte aligned without putting
	// consecutive rows 1 KiB apart (where they would share few L1 sets).
	gemmPad = 16
)

// gemmBuf is one call's packed block and its row table.
type gemmBuf struct {
	p    []float32
	rows []*float32
}

var gemmBufs = sync.Pool{New: func() any {
	return &gemmBuf{
		p:    make([]float32, gemmKC*(gemmNC+gemmPad)),
		rows: make([]*float32, gemmKC),
	}
}}

func (s strataBackend) sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	if k == 0 || alpha == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	// op(A)[i, p] = a[i*ars + p*as].
	ars, as := lda, 1
	if transA {
		ars, as = 1, lda
	}
	asmPack := hasTranspose8 && s.set >= panel.Asm
	buf := gemmBufs.Get().(*gemmBuf)
	defer gemmBufs.Put(buf)
	for jc := 0; jc < n; jc += gemmNC {
		nn := min(gemmNC, n-jc)
		ldp := (nn+15)&^15 + gemmPad
		for pc := 0; pc < k; pc += gemmKC {
			kk := min(gemmKC, k-pc)
			p := buf.p[:kk*ldp]
			packB(p, ldp, transB, b, ldb, pc, jc, kk, nn, alpha, asmPack)
			rows := buf.rows[:kk]
			panel.RowTable(rows, p, ldp, nn)
			// One register tile of rows per call, its part of C scaled by beta just before
			// its first block is added, while it is in cache.
			for i0 := 0; i0 < m; i0 += gemmMR {
				mm := min(gemmMR, m-i0)
				ci := c[i0*ldc+jc:]
				if pc == 0 {
					scaleC(mm, nn, beta, ci, ldc)
				}
				panel.Gemm(s.set, ci, ldc, a[i0*ars+pc*as:], ars, as, rows, mm, nn, kk)
			}
		}
	}
}

// packB writes alpha * op(B)[pc:pc+kk, jc:jc+nn] into p, row-major with row stride ldp. op(B)
// is B (stored [k, n], row stride ldb) or, with transB, B^T (B stored [n, k]). asm selects
// the AVX transpose for the 8x8 blocks of a transB operand; it rounds alpha*b as the Go code
// does.
func packB(p []float32, ldp int, transB bool, b []float32, ldb, pc, jc, kk, nn int, alpha float32, asm bool) {
	if !transB {
		for j := 0; j < kk; j++ {
			src := b[(pc+j)*ldb+jc : (pc+j)*ldb+jc+nn]
			dst := p[j*ldp : j*ldp+nn]
			if alpha == 1 {
				copy(dst, src)
				continue
			}
			for i, v := range src {
				dst[i] = alpha * v
			}
		}
		return
	}
	col, k8 := 0, 0
	if asm {
		k8 = kk &^ 7
		for ; col+8 <= nn && k8 > 0; col += 8 {
			src := b[(jc+col)*ldb+pc : (jc+col+7)*ldb+pc+k8]
			_ = p[(k8-1)*ldp+col+7]
			transpose8(&p[col], ldp, &src[0], ldb, k8, alpha)
		}
		// The columns done above still miss their rows j >= k8.
		for c := 0; c < col; c++ {
			r := b[(jc+c)*ldb+pc+k8 : (jc+c)*ldb+pc+kk]
			for j, v := range r {
				p[(k8+j)*ldp+c] = alpha * v
			}
		}
	}
	// Four rows of B (four columns of the block) at a time: four contiguous reads, and one
	// contiguous write of four values per row of the block.
	for ; col+4 <= nn; col += 4 {
		r0 := b[(jc+col)*ldb+pc : (jc+col)*ldb+pc+kk]
		r1 := b[(jc+col+1)*ldb+pc : (jc+col+1)*ldb+pc+kk]
		r2 := b[(jc+col+2)*ldb+pc : (jc+col+2)*ldb+pc+kk]
		r3 := b[(jc+col+3)*ldb+pc : (jc+col+3)*ldb+pc+kk]
		for j := range r0 {
			d := p[j*ldp+col : j*ldp+col+4 : j*ldp+col+4]
			d[0], d[1], d[2], d[3] = alpha*r0[j], alpha*r1[j], alpha*r2[j], alpha*r3[j]
		}
	}
	for ; col < nn; col++ {
		r := b[(jc+col)*ldb+pc : (jc+col)*ldb+pc+kk]
		for j, v := range r {
			p[j*ldp+col] = alpha * v
		}
	}
}

// scaleC sets C = beta*C (C = 0 when beta is 0, whatever C held).
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}
