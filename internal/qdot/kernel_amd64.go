//go:build amd64 && !purego

package qdot

import (
	"golang.org/x/sys/cpu"

	"github.com/stratakernels/strata/internal/panel"
)

// The CPU's kernels. x/sys/cpu checks that the OS saves the YMM (and for AVX-512 the ZMM and
// opmask) state.
var (
	hasAVX2       = cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasFMA
	hasAVXVNNI    = hasAVX2 && cpu.X86.HasAVXVNNI
	hasAVX512VNNI = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VNNI
	hasAVX512BF16 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BF16
)

var int8Kernels = func() (k []Kernel) {
	if hasAVX512VNNI {
		k = append(k, AVX512)
	}
	if hasAVXVNNI {
		k = append(k, AVXVNNI)
	}
	if hasAVX2 {
		k = append(k, AVX2)
	}
	return append(k, Go)
}()

var bf16Kernels = func() (k []Kernel) {
	if hasAVX512BF16 {
		k = append(k, AVX512BF16)
	}
	switch panel.Best() {
	case panel.Asm512:
		k = append(k, AVX512, AVX2)
	case panel.Asm:
		k = append(k, AVX2)
	}
	return append(k, Go)
}()
