package kernels

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
)

// parallelFor splits [0, n) into contiguous ranges and runs fn on each, on up to GOMAXPROCS
// goroutines. Each index is owned by exactly one call, so results written per index are the
// same whatever the split: ops keep bitwise determinism by never reducing across ranges.
// grain is the smallest range worth a goroutine.
func parallelFor(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	workers := runtime.GOMAXPROCS(0)
	if maxW := (n + grain - 1) / grain; workers > maxW {
		workers = maxW
	}
	if workers <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, hi)
	}
	wg.Wait()
}

// overTiles runs tiles 0 to n-1 on up to max(1, min(workers, n)) goroutines (the calling one
// when that is 1), each tile taken in order from a shared counter so that the schedule ends
// evenly. start runs once on each goroutine (also when n is 0) and gives its tile function
// (holding that goroutine's scratch) and what to do once it has run out of tiles. Every tile
// runs, whatever the others return; the result joins the first error of each goroutine.
func overTiles(workers, n int, start func() (tile func(i int) error, done func())) error {
	workers = max(1, min(workers, n))
	var next atomic.Int64
	errs := make([]error, workers)
	run := func(g int) {
		tile, done := start()
		defer done()
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			if err := tile(i); err != nil && errs[g] == nil {
				errs[g] = err
			}
		}
	}
	if workers == 1 {
		run(0)
		return errs[0]
	}
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(g)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
