// Package mem holds the memory hints of strata's CPU buffers: transparent huge pages for buffers
// of megabytes, and populating a mapped file's range in one call before it is read once from
// end to end. Both are hints: where the system lacks them (other systems, older Linux kernels,
// THP off) nothing changes but the speed of the first touch.
//
// Fresh buffers are not populated before their first write (madvise MADV_POPULATE_WRITE): on
// the 2-core virtual machine where a first touch costs most (BENCHMARKS.md), populating the
// scratch and the packed weights in one call on one thread cost more system time than the
// kernels' own first touches, spread over the cores, once the buffers had huge pages.
package mem

// HugePage is the size of a transparent huge page on the CPUs strata runs on (x86-64, arm64
// with 4 KiB base pages).
const HugePage = 2 << 20

// F32 is make([]float32, n) with AdviseHuge: for buffers of megabytes (scratch tensors, the
// MoE's wave buffers).
func F32(n int) []float32 { return Make[float32](n) }

// Make is make([]E, n) with AdviseHuge (F32 for other element types: weights packed at load).
func Make[E any](n int) []E {
	b := make([]E, n)
	AdviseHuge(b)
	return b
}
