package strata

import "golang.org/x/sys/unix"

// memAvailable is the physical memory (hw.memsize): macOS publishes no "available" figure that
// means what Linux's MemAvailable means (memory is compressed and purged on demand).
func memAvailable() (int64, bool) {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0, false
	}
	return int64(n), true
}
