package blas

import (
	"sync"

	"github.com/stratakernels/strata/internal/panel"
)

// strataBackend is strata's own blocked SGEMM on the panel kernels of package internal/panel
// (AVX-512F, AVX2+FMA, NEON or portable Go; set names the one it runs).
//
// Structure (the layout of Goto and van de Geijn, "Anatomy of high-performance matrix
// multiplication", ACM TOMS 34(3), 2008, with the roles of the packed operands as the panel
// kernels want them). op(B) is packed into blocks of gemmKC rows (k) by gemmNC columns,
// row-major with a padded row stride; packing transposes a transB operand, so the product
// y = x W^T of a linear layer reads W once per call. The panel kernel multiplies six rows of
// op(A), read in place through their element strides (a transposed A costs nothing), by the
// block, sweeping its columns while those rows stay in L1 and the block in L2.
//
// Order of the sums. Each element of C gets one partial sum per block of gemmKC terms, a chain
// of fused multiply-adds (a multiply and an add in the portable set) s = s + a_p b_p in index
// order starting from +0, and C is updated block after block: C = beta*C + alpha*s_0 after
// the first (C not read when beta is 0), C = C + alpha*s_b after the others. Summing per
// block keeps the rounding error of long products near that of a native library: on a
// 5 x 600 x 4096 product of unit-normal values, 0.37e-6 of max |C| against OpenBLAS's 0.32e-6,
// where one chain over all 4096 terms gives 2.3e-6 (TestStrataLongK). The blocks are fixed
// by k alone, so an element's bits do not depend on the tile, tail, caller's split or the rest
// of the shape (a row of C has the same bits whatever m), and AVX-512F and AVX2+FMA give the
// same bits. The portable set rounds differently (see internal/panel).
type strataBackend struct{ set panel.Set }

func (s strataBackend) name() string { return "strata " + s.set.String() }

// concurrent: each call runs on its caller's goroutine with its own packing buffer.
func (strataBackend) concurrent() bool { return true }

// Block sizes of the packed op(B): gemmKC rows (k) by gemmNC columns, 256 KiB of float32 (272
// with the padding), which stays in the L2 of the CPUs in use (512 KiB to 2 MiB per core)
// beside the six rows of A and C in flight. gemmNC and the tiles change speed only; gemmKC
// also fixes the partial sums, so changing it changes results in the last bits.
const (
	gemmKC = 256
	gemmNC = 256
	// gemmPad pads a packed row past its columns, keeping rows 64-byte aligned without putting
	// consecutive rows 1 KiB apart (where they would share few L1 sets).
	gemmPad = 16
	// gemmMR is the rows of C per panel call: one six-row register tile.
	gemmMR = 6
)

// gemmBuf is one call's packed block, its row table and the partial sums of one tile.
type gemmBuf struct {
	p    []float32
	rows []*float32
	tile []float32
}

var gemmBufs = sync.Pool{New: func() any {
	return &gemmBuf{
		p:    make([]float32, gemmKC*(gemmNC+gemmPad)),
		rows: make([]*float32, gemmKC),
		tile: make([]float32, gemmMR*gemmNC),
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
	asmPack := hasTranspose8 && s.set >= panel.Asm // also the AVX addition of addTile
	buf := gemmBufs.Get().(*gemmBuf)
	defer gemmBufs.Put(buf)
	for jc := 0; jc < n; jc += gemmNC {
		nn := min(gemmNC, n-jc)
		ldp := (nn+15)&^15 + gemmPad
		for pc := 0; pc < k; pc += gemmKC {
			kk := min(gemmKC, k-pc)
			p := buf.p[:kk*ldp]
			packB(p, ldp, transB, b, ldb, pc, jc, kk, nn, asmPack)
			rows := buf.rows[:kk]
			panel.RowTable(rows, p, ldp, nn)
			for i0 := 0; i0 < m; i0 += gemmMR {
				mm := min(gemmMR, m-i0)
				ci := c[i0*ldc+jc:]
				ai := a[i0*ars+pc*as:]
				if pc == 0 && beta == 0 && alpha == 1 {
					// C = s_0: the partial sum is made in C itself, from +0.
					scaleC(mm, nn, 0, ci, ldc)
					panel.Gemm(s.set, ci, ldc, ai, ars, as, rows, mm, nn, kk)
					continue
				}
				t := buf.tile[:mm*nn]
				clear(t)
				panel.Gemm(s.set, t, nn, ai, ars, as, rows, mm, nn, kk)
				bt := float32(1)
				if pc == 0 {
					bt = beta
				}
				addTile(ci, ldc, t, mm, nn, alpha, bt, asmPack)
			}
		}
	}
}

// addTile sets C[i, j] = beta*C[i, j] + alpha*t[i*n + j] for i < m, j < n (C not read when
// beta is 0). asm selects the AVX addition for alpha = beta = 1 (the same sums).
func addTile(c []float32, ldc int, t []float32, m, n int, alpha, beta float32, asm bool) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		ti := t[i*n : i*n+n]
		if n8 := n &^ 7; asm && alpha == 1 && beta == 1 && n8 > 0 {
			addTo8(&row[0], &ti[0], n8)
			row, ti = row[n8:], ti[n8:]
		}
		switch {
		case beta == 0:
			for j, v := range ti {
				row[j] = alpha * v
			}
		case beta == 1 && alpha == 1:
			for j, v := range ti {
				row[j] += v
			}
		case beta == 1:
			for j, v := range ti {
				row[j] += alpha * v
			}
		default:
			for j, v := range ti {
				row[j] = beta*row[j] + alpha*v
			}
		}
	}
}

// packB copies op(B)[pc:pc+kk, jc:jc+nn] into p, row-major with row stride ldp. op(B) is B
// (stored [k, n], row stride ldb) or, with transB, B^T (B stored [n, k]). asm selects the AVX
// transpose for the 8x8 blocks of a transB operand.
func packB(p []float32, ldp int, transB bool, b []float32, ldb, pc, jc, kk, nn int, asm bool) {
	if !transB {
		for j := 0; j < kk; j++ {
			copy(p[j*ldp:j*ldp+nn], b[(pc+j)*ldb+jc:(pc+j)*ldb+jc+nn])
		}
		return
	}
	col, k8 := 0, 0
	if asm {
		k8 = kk &^ 7
		for ; col+8 <= nn && k8 > 0; col += 8 {
			src := b[(jc+col)*ldb+pc : (jc+col+7)*ldb+pc+k8]
			_ = p[(k8-1)*ldp+col+7]
			transpose8(&p[col], ldp, &src[0], ldb, k8)
		}
		// The columns done above still miss their rows j >= k8.
		for c := 0; c < col; c++ {
			r := b[(jc+c)*ldb+pc+k8 : (jc+c)*ldb+pc+kk]
			for j, v := range r {
				p[(k8+j)*ldp+c] = v
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
			d[0], d[1], d[2], d[3] = r0[j], r1[j], r2[j], r3[j]
		}
	}
	for ; col < nn; col++ {
		r := b[(jc+col)*ldb+pc : (jc+col)*ldb+pc+kk]
		for j, v := range r {
			p[j*ldp+col] = v
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
