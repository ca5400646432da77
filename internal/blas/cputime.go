package blas

import (
	"time"

	"github.com/stratakernels/strata/internal/cputime"
)

var clockStart = time.Now()

// threadTime is the calling thread's CPU time where the OS gives it (cputime.Thread), else the
// monotonic time since the package started: a measurement locked to its thread takes the
// difference of two readings.
func threadTime() time.Duration {
	if d, ok := cputime.Thread(); ok {
		return d
	}
	return time.Since(clockStart)
}
