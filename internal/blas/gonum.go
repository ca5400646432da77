package blas

import (
	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// gonumBackend is the pure-Go fallback (gonum's blas/gonum, row-major like this package).
type gonumBackend struct{}

func (gonumBackend) name() string { return "gonum" }

func (gonumBackend) concurrent() bool { return true }

func (gonumBackend) sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	ta, tb := gblas.NoTrans, gblas.NoTrans
	if transA {
		ta = gblas.Trans
	}
	if transB {
		tb = gblas.Trans
	}
	if k == 0 {
		// gonum wants non-empty slices whenever m and n are; only the scale of C remains.
		scaleC(m, n, beta, c, ldc)
		return
	}
	gonum.Implementation{}.Sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// scaleC sets C = beta*C (C = 0 when beta is 0, whatever C held).
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		for j := range row {
			if beta == 0 {
				row[j] = 0
			} else {
				row[j] *= beta
			}
		}
	}
}
