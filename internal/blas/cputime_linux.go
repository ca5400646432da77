package blas

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID): a
// benchmark locked to its thread measures its own work with it, not the time other processes
// of a shared machine take from its core. ok is false where the clock cannot be read.
func threadCPU() (d time.Duration, ok bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
