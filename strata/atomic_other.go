//go:build !unix

package strata

import (
	"errors"
	"os"
)

// processAlive cannot tell on this platform: every process is taken for alive, so WriteFile
// removes no temporary file of another run.
func processAlive(pid int) bool { return true }

// errNoReader is never returned on this platform.
var errNoReader = errors.New("no reader")

// openInPlace opens an existing device for writing.
func openInPlace(path string) (*os.File, error) { return os.OpenFile(path, os.O_WRONLY, 0) }
