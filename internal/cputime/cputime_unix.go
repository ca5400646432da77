//go:build linux || darwin

package cputime

import (
	"time"

	"golang.org/x/sys/unix"
)

// Process is the CPU time every thread of the process has used so far (getrusage
// RUSAGE_SELF): user and system time, the system part holding the kernel's work for it (page
// faults, madvise, futex waits spinning in the kernel). The total is the scheduler's exact run
// time; its split into user and system is the kernel's estimate, in microseconds.
func Process() (user, sys time.Duration, ok bool) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0, 0, false
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), true
}
