//go:build unix

package safetensors

import (
	"os"
	"syscall"
)

// mapFile maps the file read-only. A zero-length file cannot be mapped and never reaches here
// (Open rejects files under 8 bytes).
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return readAll(f, size)
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}

func readAll(f *os.File, size int64) ([]byte, func() error, error) {
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}
