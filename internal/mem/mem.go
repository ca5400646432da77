// Package mem holds the memory hints of strata's CPU buffers: transparent huge pages for buffers
// of megabytes, and populating a fresh buffer's pages in one call before the kernels write it.
// Both are hints: where the system lacks them (other systems, older Linux kernels, THP off)
// nothing changes but the speed of the first touch.
package mem

// HugePage is the size of a transparent huge page on the CPUs strata runs on (x86-64, arm64
// with 4 KiB base pages).
const HugePage = 2 << 20

// F32 is make([]float32, n) with AdviseHuge and Populate: for buffers of megabytes that are
// written soon after (scratch tensors, the MoE's wave buffers).
func F32(n int) []float32 { return Make[float32](n) }

// Make is make([]E, n) with AdviseHuge and Populate (F32 for other element types: weights
// packed at load).
func Make[E any](n int) []E {
	b := make([]E, n)
	AdviseHuge(b)
	Populate(b)
	return b
}
