// Package blas is strata's single-precision matrix multiply: row-major SGEMM
// (C = alpha*op(A)*op(B) + beta*C) on the best implementation the platform offers, chosen once
// at first use:
//
//   - Linux: OpenBLAS (Debian's libopenblas0, soname libopenblas.so.0), loaded at run time with
//     purego (no cgo).
//   - macOS: Accelerate's cblas_sgemm, loaded the same way.
//   - elsewhere, when the library is missing, or with STRATA_BLAS=strata: strata's own blocked
//     SGEMM (strata.go) on the panel kernels of package internal/panel: AVX-512F or AVX2+FMA
//     on amd64, NEON on arm64, portable Go on other CPUs and with the purego build tag.
//
// Impl reports which one is in use and, when it is not a native library, why; the choice is
// never silent.
//
// Determinism and threads. Each implementation partitions C among its threads and runs the K
// reduction of an element of C in an order fixed by the shape and the thread count, so results
// are bitwise identical across runs. OpenBLAS's results do depend on its own thread count (its
// single-thread path and its edge tiles block the product differently: for a 257x384x1000
// product, 1 and 2 threads differ in 59% of the elements, 2 and 3 threads in 2%), so the count
// is pinned once at load with openblas_set_num_threads, to STRATA_BLAS_THREADS or, when that is
// unset, to 1 (a value that is not a count from 1 to 1024 counts as 1, and Impl says so). With one thread per call the library is safe to enter from many goroutines at
// once (Concurrent reports it), and callers parallelise themselves: package kernels splits a
// product into column blocks whose shapes depend only on the problem, runs them on all cores
// and so gets the same bits whatever GOMAXPROCS and core count are. With STRATA_BLAS_THREADS > 1
// calls are serialised by a lock and the library spreads each one over its own threads.
// strata's GEMM runs each call on its caller's goroutine and may be called concurrently; it
// sums every element of C in blocks of K terms fixed by K alone, each block a chain of fused
// multiply-adds in K order, so an element's bits do not even depend on the shape of the
// product around it (a row of C is the same whatever m, a column block the same as the whole). Accelerate's threading is its own
// (VECLIB_MAXIMUM_THREADS); this package cannot test it from Linux and serialises its calls.

package blas

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/stratakernels/strata/internal/panel"
)

// ErrArg is wrapped by every error Sgemm returns: a negative size, a leading dimension smaller
// than the stored row, a slice too short for its matrix, or a size beyond the 32-bit BLAS
// interface.
var ErrArg = errors.New("blas: invalid argument")

// backend is one SGEMM implementation. Arguments reach it already validated.
type backend interface {
	name() string
	sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
		b []float32, ldb int, beta float32, c []float32, ldc int)
	concurrent() bool
}

var (
	selectOnce sync.Once
	selected   backend
	loadNote   string // why a native library was not used, empty when it was
	badEnv     string // a STRATA_BLAS value that was not understood, empty when none
)

func choose() backend {
	selectOnce.Do(func() {
		selected, loadNote, badEnv = pick(os.Getenv("STRATA_BLAS"), func() (backend, error) {
			return loadNative(threadsWanted())
		})
		if _, bad := parseThreads(os.Getenv("STRATA_BLAS_THREADS")); bad != "" && isNative(selected) {
			badEnv = strings.TrimPrefix(badEnv+"; "+bad, "; ")
		}
	})
	return selected
}

// pick chooses the implementation for the value env of STRATA_BLAS, calling load for the
// native library unless env forces strata's GEMM. note says why the native library is not in
// use (empty when it is), bad names a value of env that was not understood (then ignored).
func pick(env string, load func() (backend, error)) (b backend, note, bad string) {
	switch env {
	case "strata":
		return strataBackend{panel.Best()}, "forced by STRATA_BLAS=strata", ""
	case "":
	default:
		bad = fmt.Sprintf("STRATA_BLAS=%q ignored: its one value is strata", env)
	}
	nb, err := load()
	if err != nil {
		return strataBackend{panel.Best()}, "no native BLAS: " + err.Error(), bad
	}
	return nb, "", bad
}

// threadsWanted is the thread count to pin a native library to: STRATA_BLAS_THREADS when it
// holds a positive integer, else 1 (callers run single-threaded products concurrently).
func threadsWanted() int {
	n, _ := parseThreads(os.Getenv("STRATA_BLAS_THREADS"))
	return n
}

// parseThreads reads a STRATA_BLAS_THREADS value: a positive integer (at most 1024), else 1
// with bad saying the value was ignored (Impl reports it); "" is 1 with no complaint.
func parseThreads(v string) (n int, bad string) {
	if v == "" {
		return 1, ""
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 1024 {
		return n, ""
	}
	return 1, fmt.Sprintf("STRATA_BLAS_THREADS=%q ignored: want a thread count from 1 to 1024, using 1", v)
}

// Concurrent reports whether Sgemm may be called from several goroutines at once with each
// call running on its caller's thread alone: true for OpenBLAS pinned to one thread and for
// strata's GEMM. When false, concurrent calls are serialised and each spreads over the
// library's threads.
func Concurrent() bool {
	return choose().concurrent()
}

// Impl names the implementation in use, with its version and thread count where known, and
// why a native library is not in use when it is not, e.g. "openblas 0.3.21 (core Haswell from
// CPU features, pthread, 1 thread/call, concurrent)", "accelerate (cblas_sgemm)", or "strata
// avx2-fma asm (no native BLAS: libopenblas.so.0: ...)".
func Impl() string { return implName(choose(), loadNote, badEnv) }

// implName is b's name followed by the notes that apply to it.
func implName(b backend, note, bad string) string {
	var notes []string
	if note != "" && !isNative(b) {
		notes = append(notes, note)
	}
	if bad != "" {
		notes = append(notes, bad)
	}
	if len(notes) == 0 {
		return b.name()
	}
	return b.name() + " (" + strings.Join(notes, "; ") + ")"
}

// Native reports whether a native BLAS library (OpenBLAS or Accelerate) is in use.
func Native() bool { return isNative(choose()) }

func isNative(b backend) bool {
	switch b.(type) {
	case strataBackend:
		return false
	}
	return true
}

// Sgemm computes C = alpha*op(A)*op(B) + beta*C on row-major float32 matrices, where op(X) is
// X or X^T as transA/transB say. op(A) is [m, k], op(B) is [k, n], C is [m, n]; lda, ldb, ldc
// are the row strides of A, B and C as stored (A stored [m, k] when !transA, [k, m] when
// transA; likewise B). The common linear-layer product y[T, N] = x[T, K] * W[N, K]^T is
// Sgemm(false, true, T, N, K, 1, x, K, W, K, 0, y, N).
// With beta == 0, C is overwritten (its old contents, NaNs included, are not read by the
// native libraries and strata's GEMM alike).
// Errors wrap ErrArg.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) error {
	if m < 0 || n < 0 || k < 0 {
		return fmt.Errorf("%w: sgemm sizes m=%d n=%d k=%d", ErrArg, m, n, k)
	}
	if m > math.MaxInt32 || n > math.MaxInt32 || k > math.MaxInt32 ||
		lda > math.MaxInt32 || ldb > math.MaxInt32 || ldc > math.MaxInt32 {
		return fmt.Errorf("%w: sgemm size beyond 32-bit BLAS indices", ErrArg)
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	if err := checkMat("A", a, ar, ac, lda); err != nil {
		return err
	}
	if err := checkMat("B", b, br, bc, ldb); err != nil {
		return err
	}
	if err := checkMat("C", c, m, n, ldc); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	choose().sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	return nil
}

// checkMat checks that x holds a row-major [rows, cols] matrix with row stride ld.
func checkMat(what string, x []float32, rows, cols, ld int) error {
	if ld < max(1, cols) {
		return fmt.Errorf("%w: sgemm ld%s=%d < max(1, %d)", ErrArg, what, ld, cols)
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	if need := (rows-1)*ld + cols; len(x) < need {
		return fmt.Errorf("%w: sgemm %s has %d elements, [%d, %d] with stride %d needs %d",
			ErrArg, what, len(x), rows, cols, ld, need)
	}
	return nil
}
