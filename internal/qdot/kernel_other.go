//go:build (!amd64 && !arm64) || purego

package qdot

var (
	int8Kernels = []Kernel{Go}
	bf16Kernels = []Kernel{Go}
)
