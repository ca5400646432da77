package qdot

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

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

// Int8Kernels lists the int8 kernels this build runs on this CPU, the widest first (Go last).
func Int8Kernels() []Kernel { return slices.Clone(int8Kernels) }

// BF16Kernels lists the bf16 kernels this build runs on this CPU, the widest first (Go last).
func BF16Kernels() []Kernel { return slices.Clone(bf16Kernels) }

// BestInt8 is the widest int8 kernel this build runs on this CPU (per instruction, VPDPBUSD
// on 512 bits did four times the multiplies of VFMADD231PS at the same rate here).
func BestInt8() Kernel { return int8Kernels[0] }

// BestBF16 is the fastest bf16 kernel this build runs on this CPU: with AVX512_BF16, VDPBF16PS
// and its emulation on the AVX-512F panels are timed against each other once, at first use
// (about a millisecond; BF16Choice says the outcome). Having the instruction is not enough: on
// a Sapphire Rapids-class Xeon, VDPBF16PS on 512-bit registers issued at a quarter of the rate
// of VFMADD231PS (0.54 against 0.13 ns per instruction in a loop of independent ones), half its
// multiply rate, so the emulation runs there. The two give the same bits but for subnormal
// partial sums (package documentation).
func BestBF16() Kernel {
	bf16Once.Do(chooseBF16)
	return bf16Best
}

// BF16Choice says how BestBF16 was chosen: "" when the CPU has one candidate, else the timing.
func BF16Choice() string {
	bf16Once.Do(chooseBF16)
	return bf16Why
}

var (
	bf16Once sync.Once
	bf16Best Kernel
	bf16Why  string
)

// chooseBF16 times VDPBF16PS against its AVX-512F emulation on one product (96 x 128 x 1024,
// packing included; five alternating rounds, the fastest of each) when the CPU has both.
func chooseBF16() {
	bf16Best = bf16Kernels[0]
	if bf16Best != AVX512BF16 || !slices.Contains(bf16Kernels, AVX512) {
		return
	}
	const T, N, K = 96, 128, 1024
	w := &BF16{N: N, K: K, Bits: make([]uint16, N*K)}
	xs := make([]float32, T*K)
	for i := range w.Bits {
		w.Bits[i] = ToBF16(float32(i%7) - 3)
	}
	for i := range xs {
		xs[i] = float32(i%5) - 2
	}
	var x BF16Act
	y := make([]float32, T*N)
	if RoundBF16(&x, xs, T, K) != nil {
		return
	}
	x.emuOperand()
	best := map[Kernel]time.Duration{AVX512BF16: 1 << 62, AVX512: 1 << 62}
	for range 5 {
		for _, k := range []Kernel{AVX512BF16, AVX512} {
			t0 := time.Now()
			if MatMulBF16(y, N, &x, w, 0, N, k) != nil {
				return
			}
			best[k] = min(best[k], time.Since(t0))
		}
	}
	if best[AVX512] < best[AVX512BF16] {
		bf16Best = AVX512
	}
	other := AVX512BF16 + AVX512 - bf16Best
	bf16Why = fmt.Sprintf("%s timed at %.2fx the speed of %s at first use",
		BF16Name(bf16Best), float64(best[other])/float64(best[bf16Best]), BF16Name(other))
}

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
