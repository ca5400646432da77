//go:build !linux

package kernels

// adviseHuge does nothing here: transparent huge pages are a Linux hint.
func adviseHuge([]float32) {}

// hugeF32 is make([]float32, n).
func hugeF32(n int) []float32 { return make([]float32, n) }
