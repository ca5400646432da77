//go:build arm64 && !purego

package qdot

import "golang.org/x/sys/cpu"

// SDOT is the dot-product extension (FEAT_DotProd: optional from Armv8.2, part of Armv8.4,
// e.g. every Apple M and Neoverse N1 or later core); x/sys/cpu calls it ASIMDDP.
var hasDot = cpu.ARM64.HasASIMDDP

var int8Kernels = func() (k []Kernel) {
	if hasDot {
		k = append(k, NEON)
	}
	return append(k, Go)
}()

// The NEON panel kernels run on every arm64 CPU.
var bf16Kernels = []Kernel{NEON, Go}
