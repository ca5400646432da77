//go:build !linux

package cputime

import "time"

// Thread is not measured here (cputime_linux.go).
func Thread() (time.Duration, bool) { return 0, false }
