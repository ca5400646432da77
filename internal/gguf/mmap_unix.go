//go:build unix

package gguf

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// mapFile maps the file read-only (size > 0). evict drops the process's pages of the mapping
// (MADV_DONTNEED: the file's pages stay in the page cache; a later read faults them back).
func mapFile(f *os.File, size int64) (b []byte, unmap func() error, evict func(), err error) {
	b, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, nil, err
	}
	return b, func() error { return syscall.Munmap(b) }, func() { _ = unix.Madvise(b, unix.MADV_DONTNEED) }, nil
}
