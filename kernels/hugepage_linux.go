//go:build linux

package kernels

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on the CPUs strata runs on (x86-64, arm64
// with 4 KiB base pages).
const hugePage = 2 << 20

// hugeF32 is make([]float32, n) with adviseHuge: for buffers of megabytes that are written
// soon after (scratch tensors, the MoE's wave buffers).
func hugeF32(n int) []float32 {
	b := make([]float32, n)
	adviseHuge(b)
	return b
}

// adviseHuge asks the kernel for transparent huge pages (madvise MADV_HUGEPAGE) over the whole
// 2 MiB pages inside b, before its first touch: a fresh buffer of n MiB then takes n/2 page
// faults instead of 256 n. It is a hint: where THP is off ("never") or no huge page is free the
// kernel keeps 4 KiB pages, and nothing else changes.
func adviseHuge(b []float32) {
	if len(b)*4 < 2*hugePage {
		return
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	lo := (p + hugePage - 1) &^ (hugePage - 1)
	hi := (p + uintptr(len(b))*4) &^ (hugePage - 1)
	if hi <= lo {
		return
	}
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&b[0]), lo-p)), hi-lo), unix.MADV_HUGEPAGE)
}
