package kernels

import (
	"runtime"
	"sync"
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
