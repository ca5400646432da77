//go:build unix

package tempfile

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process of this id runs (kill with signal 0: ESRCH means none;
// EPERM, a process of another user, is alive).
func processAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
