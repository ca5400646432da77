package blas

import "time"

var clockStart = time.Now()

// threadTime is the calling thread's CPU time where the OS gives it (threadCPU), else the
// monotonic time since the package started: a measurement locked to its thread takes the
// difference of two readings.
func threadTime() time.Duration {
	if d, ok := threadCPU(); ok {
		return d
	}
	return time.Since(clockStart)
}
