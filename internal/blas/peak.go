package blas

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Peak measures this machine's single-precision GEMM peak P in GFLOP/s on all cores: the best
// of reps runs of one n x n x n product (C = A B^T, 2n^3 flops), with a native library
// temporarily given runtime.NumCPU() threads of its own (its best case for one large call) and
// then pinned back. An implementation that runs each call on its caller's goroutine (strata's
// GEMM) runs the product as runtime.NumCPU() column blocks, one per goroutine. how names the
// implementation and thread count measured. Other Sgemm calls made meanwhile are serialised
// (native library), so run it while nothing else multiplies. n and reps must be positive;
// errors wrap ErrArg.
func Peak(n, reps int) (gflops float64, how string, err error) {
	if n <= 0 || reps <= 0 {
		return 0, "", fmt.Errorf("%w: peak size %d, reps %d", ErrArg, n, reps)
	}
	r := rand.New(rand.NewPCG(1, uint64(n)))
	a := make([]float32, n*n)
	b := make([]float32, n*n)
	c := make([]float32, n*n)
	for i := range a {
		a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	how = Impl()
	run := func() error { return Sgemm(false, true, n, n, n, 1, a, n, b, n, 0, c, n) }
	if pinned := nativeThreads(); pinned > 0 {
		all := numCPU()
		setNativeThreads(all)
		defer setNativeThreads(pinned)
		how = fmt.Sprintf("%s, measured with %d threads in one call", how, nativeThreads())
	} else if workers := min(numCPU(), n); !Native() && workers > 1 {
		how = fmt.Sprintf("%s, measured as %d column blocks on as many goroutines", how, workers)
		run = func() error {
			errs := make(chan error, workers)
			for w := range workers {
				go func() {
					c0, c1 := w*n/workers, (w+1)*n/workers
					errs <- Sgemm(false, true, n, c1-c0, n, 1, a, n, b[c0*n:], n, 0, c[c0:], n)
				}()
			}
			var err error
			for range workers {
				err = errors.Join(err, <-errs)
			}
			return err
		}
	}
	best := time.Duration(1 << 62)
	for i := 0; i <= reps; i++ { // the first run warms up
		t0 := time.Now()
		if err := run(); err != nil {
			return 0, "", err
		}
		if d := time.Since(t0); i > 0 && d < best {
			best = d
		}
	}
	return 2 * float64(n) * float64(n) * float64(n) / best.Seconds() / 1e9, how, nil
}
