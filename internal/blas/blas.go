// Package blas is strata's single-precision matrix multiply: row-major SGEMM
// (C = alpha*op(A)*op(B) + beta*C) on the best implementation the platform offers, chosen once
// at first use:
//
//   - Linux: OpenBLAS (Debian's libopenblas0, soname libopenblas.so.0), loaded at run time with
//     purego (no cgo).
//   - macOS: Accelerate's cblas_sgemm, loaded the same way.
//   - elsewhere, when the library is missing, when it is slower, or with STRATA_BLAS=strata:
//     strata's own blocked SGEMM (strata.go) on the panel kernels of package internal/panel:
//     AVX-512F or AVX2+FMA on amd64, NEON on arm64, portable Go on other CPUs and with the
//     purego build tag.
//
// When the native library loads, the two are timed against each other on the products of a
// prefill, once per machine (the result is cached in the user cache directory; speed.go), and
// the faster runs: on a Zen 4, strata's AVX-512 SGEMM ran the main job faster than OpenBLAS
// 0.3.21's SkylakeX kernels. STRATA_BLAS=native or strata skips the timing. Impl reports which
// implementation is in use and why it was picked; the choice is never silent. The two round
// differently, so the choice changes results in the last bits; the cache keeps it stable.
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
	loadNote   string // why the implementation in use was picked
	badEnv     string // a STRATA_BLAS value that was not understood, empty when none
)

func choose() backend {
	selectOnce.Do(func() {
		selected, loadNote, badEnv = pick(os.Getenv("STRATA_BLAS"), func() (backend, error) {
			return loadNative(threadsWanted())
		}, func(native, own backend) (backend, string) {
			path, err := speedCacheFile()
			return bySpeed(native, own, speedKey(native, own), path, err, measureSpeed)
		})
		if _, bad := parseThreads(os.Getenv("STRATA_BLAS_THREADS")); bad != "" && isNative(selected) {
			badEnv = strings.TrimPrefix(badEnv+"; "+bad, "; ")
		}
	})
	return selected
}

// pick chooses the implementation for the value env of STRATA_BLAS: strata's GEMM without
// trying the native library ("strata"), the native library when load gives it ("native"), or,
// by default, the faster of the two as bySpeed says (speed; only when the native library runs
// each call on its caller's thread, the way package kernels calls it, and strata's GEMM has
// vector kernels: otherwise the native library is kept without timing). note says why the implementation in use was
// picked, bad names a value of env that was not understood (then ignored).
func pick(env string, load func() (backend, error), speed func(native, own backend) (backend, string)) (b backend, note, bad string) {
	own := strataBackend{panel.Best()}
	switch env {
	case "strata":
		return own, "forced by STRATA_BLAS=strata", ""
	case "", "native":
	default:
		bad = fmt.Sprintf("STRATA_BLAS=%q ignored: its values are strata and native", env)
	}
	nb, err := load()
	switch {
	case err != nil && env == "native":
		return own, "STRATA_BLAS=native, but no native BLAS: " + err.Error(), bad
	case err != nil:
		return own, "no native BLAS: " + err.Error(), bad
	case env == "native":
		return nb, "forced by STRATA_BLAS=native", bad
	case !nb.concurrent():
		return nb, "not timed against strata's GEMM: the library spreads each call over its own threads", bad
	case own.set == panel.Generic:
		// The portable set runs about 15 times slower than the vector ones (BENCHMARKS.md):
		// timing it would only cost seconds.
		return nb, "not timed against strata's GEMM: it has no vector kernels on this CPU and build", bad
	}
	b, note = speed(nb, own)
	return b, note, bad
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
// why it was picked, e.g. "openblas 0.3.21 (core Haswell from CPU features, pthread, 1
// thread/call, concurrent) (picked by speed: 1.08x strata avx2-fma asm on prefill GEMMs at T
// 512 and 2048; cached in ...)", "accelerate (cblas_sgemm) (not timed against ...)", or
// "strata avx2-fma asm (no native BLAS: libopenblas.so.0: ...)".
func Impl() string { return implName(choose(), loadNote, badEnv) }

// implName is b's name followed by the notes that apply to it.
func implName(b backend, note, bad string) string {
	var notes []string
	if note != "" {
		notes = append(notes, note)
	}
	if bad != "" {
		notes = append(notes, bad)
	}
	name := b.name()
	switch {
	case len(notes) == 0:
		return name
	case strings.HasSuffix(name, ")"):
		// "openblas 0.3.21 (core Haswell, ...)": the notes join the name's own parentheses.
		return strings.TrimSuffix(name, ")") + "; " + strings.Join(notes, "; ") + ")"
	}
	return name + " (" + strings.Join(notes, "; ") + ")"
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
