//go:build !linux

package kernels

// hugeF32 is make([]float32, n): transparent huge pages are a Linux hint.
func hugeF32(n int) []float32 { return make([]float32, n) }
