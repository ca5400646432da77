package qdot

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), so that a
// benchmark locked to its thread measures its own work on a shared machine.
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
