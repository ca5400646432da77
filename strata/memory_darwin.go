package strata

import "golang.org/x/sys/unix"

// memLimits is the physical memory (hw.memsize): macOS publishes no "available" figure that
// means what Linux's MemAvailable means (memory is compressed and purged on demand).
func memLimits() []memLimit {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return nil
	}
	return []memLimit{{int64(n), "the physical memory (hw.memsize)"}}
}
