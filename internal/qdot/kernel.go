package qdot

import (
	"errors"
	"fmt"
	"slices"

	"github.com/stratakernels/strata/internal/panel"
)

// Errors wrapped by the functions of this package, with the argument named.
var (
	// ErrShape: sizes that do not agree (T, K, N, a slice's length, a column range).
	ErrShape = errors.New("qdot: shape mismatch")
	// ErrUnsupported: a bit width, group or block size, weight type or kernel this package or
	// this CPU does not run.
	ErrUnsupported = errors.New("qdot: unsupported")
)

// Kernel is one implementation of a mode's products.
type Kernel uint8

const (
	// Go is portable Go: int8 integer sums; bf16 on the portable panel kernels.
	Go Kernel = iota
	// AVX2 (amd64, with FMA): int8 through VPMADDUBSW and VPMADDWD; bf16 on the AVX2+FMA
	// panel kernels.
	AVX2
	// AVXVNNI (amd64): int8 through the VEX-encoded VPDPBUSD on 256-bit registers. int8 only.
	AVXVNNI
	// AVX512 (amd64): int8 through VPDPBUSD on 512-bit registers (AVX512_VNNI); bf16 on the
	// AVX-512F panel kernels.
	AVX512
	// AVX512BF16 (amd64): bf16 through VDPBF16PS. bf16 only.
	AVX512BF16
	// NEON (arm64): int8 through SDOT (the dot-product extension); bf16 on the NEON panel
	// kernels.
	NEON
)

// String names the kernel as a kernels line reports it.
func (k Kernel) String() string {
	switch k {
	case Go:
		return "generic Go"
	case AVX2:
		return "avx2"
	case AVXVNNI:
		return "avx-vnni"
	case AVX512:
		return "avx512"
	case AVX512BF16:
		return "avx512-bf16"
	case NEON:
		return "neon"
	}
	return fmt.Sprintf("Kernel(%d)", uint8(k))
}

// Int8Kernels lists the int8 kernels this build runs on this CPU, fastest first (Go last).
func Int8Kernels() []Kernel { return slices.Clone(int8Kernels) }

// BF16Kernels lists the bf16 kernels this build runs on this CPU, fastest first (Go last).
func BF16Kernels() []Kernel { return slices.Clone(bf16Kernels) }

// BestInt8 is the fastest int8 kernel this build runs on this CPU.
func BestInt8() Kernel { return int8Kernels[0] }

// BestBF16 is the fastest bf16 kernel this build runs on this CPU.
func BestBF16() Kernel { return bf16Kernels[0] }

// Int8Name and BF16Name describe a kernel with its instructions, for a kernels line:
// e.g. "avx512 (vpdpbusd)", "avx512-bf16 (vdpbf16ps)", "avx2 (vpdpbf16ps emulated with fma)".
func Int8Name(k Kernel) string {
	switch k {
	case AVX512, AVXVNNI:
		return k.String() + " (vpdpbusd)"
	case AVX2:
		return "avx2 (vpmaddubsw)"
	case NEON:
		return "neon (sdot)"
	}
	return k.String()
}

// BF16Name: see Int8Name.
func BF16Name(k Kernel) string {
	if k == AVX512BF16 {
		return "avx512-bf16 (vdpbf16ps)"
	}
	return k.String() + " (vdpbf16ps emulated: fma on widened pairs)"
}

// emuSet is the panel kernel set of a bf16 emulation kernel.
func emuSet(k Kernel) panel.Set {
	switch k {
	case AVX512:
		return panel.Asm512
	case AVX2, NEON:
		return panel.Asm
	}
	return panel.Generic
}

// checkKernel refuses a kernel that is not in the list the CPU runs.
func checkKernel(mode string, k Kernel, have []Kernel) error {
	if !slices.Contains(have, k) {
		return fmt.Errorf("%w: %s kernel %v on this CPU and build (have %v)", ErrUnsupported, mode, k, have)
	}
	return nil
}
