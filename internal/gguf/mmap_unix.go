//go:build unix

package gguf

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapFile maps the file read-only (size > 0). evict(p), for p a view into the mapping, drops the
// process's pages that lie wholly inside p (MADV_DONTNEED: the file's pages stay in the page
// cache; a later read faults them back); it does nothing for a p outside the mapping.
func mapFile(f *os.File, size int64) (b []byte, unmap func() error, evict func(p []byte), err error) {
	b, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, nil, err
	}
	evict = func(p []byte) {
		if len(p) == 0 {
			return
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		s := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
		if s < lo || s-lo+uintptr(len(p)) > uintptr(len(b)) {
			return
		}
		// The mapping starts on a page: round p's start up and its end down to pages.
		page := uintptr(os.Getpagesize())
		from, to := (s-lo+page-1)/page*page, (s-lo+uintptr(len(p)))/page*page
		if to > from {
			_ = unix.Madvise(b[from:to], unix.MADV_DONTNEED)
		}
	}
	return b, func() error { return syscall.Munmap(b) }, evict, nil
}
