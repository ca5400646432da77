//go:build linux

package mem

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// page is the base page size those hints round to.
const page = 4 << 10

// inner returns the bytes of the whole pages of size align inside b, when b has at least min
// bytes (nil otherwise or when there is no whole page).
func inner[E any](b []E, align, min uintptr) []byte {
	if len(b) == 0 || uintptr(len(b))*unsafe.Sizeof(b[0]) < min {
		return nil
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	lo := (p + align - 1) &^ (align - 1)
	hi := (p + uintptr(len(b))*unsafe.Sizeof(b[0])) &^ (align - 1)
	if hi <= lo {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&b[0]), lo-p)), hi-lo)
}

// AdviseHuge asks the kernel for transparent huge pages (madvise MADV_HUGEPAGE) over the whole
// 2 MiB pages inside b, before its first touch: a fresh buffer of n MiB then takes n/2 page
// faults instead of 256 n. Where THP is off ("never") or no huge page is free the kernel keeps
// 4 KiB pages. Buffers under 4 MiB are left alone.
func AdviseHuge[E any](b []E) {
	if r := inner(b, HugePage, 2*HugePage); r != nil {
		_ = unix.Madvise(r, unix.MADV_HUGEPAGE)
	}
}

// PopulateRead maps the whole 4 KiB pages inside b in one call (madvise MADV_POPULATE_READ,
// Linux 5.14 and later) before they are read: for a mapped file's range read once from end to
// end (a weight packed at load), one call instead of a page fault every few pages. Nothing is
// written; on memory already present, or an older kernel, nothing changes. Ranges under 64 KiB
// are left alone.
func PopulateRead(b []byte) {
	if r := inner(b, page, 16*page); r != nil {
		_ = unix.Madvise(r, unix.MADV_POPULATE_READ)
	}
}
