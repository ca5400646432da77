//go:build unix

package strata

import (
	"os"
	"syscall"
)

// errNoReader is what opening a FIFO that no process reads for writing without blocking fails
// with.
var errNoReader = syscall.ENXIO

// openInPlace opens an existing device or FIFO for writing. It does not block: a FIFO with no
// reader fails at once (errNoReader) instead of waiting for one, past SIGINT and SIGTERM.
func openInPlace(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
}
