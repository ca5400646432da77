//go:build !unix

package strata

import (
	"errors"
	"os"
)

// errNoReader is never returned on this platform.
var errNoReader = errors.New("no reader")

// openInPlace opens an existing device for writing.
func openInPlace(path string) (*os.File, error) { return os.OpenFile(path, os.O_WRONLY, 0) }
