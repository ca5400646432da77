//go:build !linux

package qdot

import "time"

// threadCPU is not measured here (see cputime_linux_test.go).
func threadCPU() (time.Duration, bool) { return 0, false }
