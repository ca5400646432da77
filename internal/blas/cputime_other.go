//go:build !linux

package blas

import "time"

// threadCPU is not measured here (see cputime_linux.go).
func threadCPU() (time.Duration, bool) { return 0, false }
