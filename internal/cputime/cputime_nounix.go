//go:build !linux && !darwin

package cputime

import "time"

// Process is not measured here (cputime_unix.go).
func Process() (user, sys time.Duration, ok bool) { return 0, 0, false }
