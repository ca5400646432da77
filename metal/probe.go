package metal

import (
	"fmt"

	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
)

// probeFile names the probe kernel's source in diagnostics.
const probeFile = "probe.metal"

// probeSource is a kernel using what every kernel file needs from the language and the GPU:
// bfloat, simdgroup matrices and SIMD-group reductions, compiled with the kernel files' own
// options (CompileOptions: MSL 3.1).
const probeSource = `#include <metal_stdlib>
using namespace metal;
kernel void strata_probe(device float* y [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
    bfloat b = bfloat(float(lane));
    simdgroup_float8x8 m = simdgroup_float8x8(float(b));
    simdgroup_float8x8 r;
    simdgroup_multiply(r, m, m);
    simdgroup_store(r, y, 8);
    y[64 + lane] = simd_sum(float(b));
}
`

// Probe reports why dev cannot run the kernels, or nil. A device that reports GPU families
// (mtl.FamilyReporter: Apple's Metal) must be MTLGPUFamilyApple7 or later (M1 on: SIMD width 32,
// simdgroup matrices, bfloat; an Intel or AMD GPU of an Intel Mac is not); then, on any device,
// a probe kernel of bfloat, simdgroup-matrix and SIMD-group code must compile with the kernel
// files' options (CompileOptions, MSL 3.1: macOS 14 on; macOS 13's compiler refuses the version)
// and build a pipeline of SIMD width 32 (the kernels index lanes as tid % 32). The probe's
// library and pipeline are released; nothing runs. Errors wrap op.ErrUnsupported with the
// device's name and the failure (the compiler's message included).
func Probe(dev mtl.Device) error {
	if f, ok := dev.(mtl.FamilyReporter); ok && !f.SupportsFamily(mtl.FamilyApple7) {
		return fmt.Errorf("metal: %w: %s is not an Apple GPU of family Apple7 (M1) or later", op.ErrUnsupported, dev.Name())
	}
	opts := CompileOptions(probeFile)
	lib, err := dev.NewLibrary(probeFile, CompileSource(probeFile, probeSource), opts)
	if err != nil {
		return fmt.Errorf("metal: %w: %s does not compile the kernels' language (%v): %w", op.ErrUnsupported, dev.Name(), opts, err)
	}
	defer lib.Release()
	p, err := lib.Pipeline("strata_probe", nil)
	if err != nil {
		return fmt.Errorf("metal: %w: %s builds no pipeline of the probe kernel: %w", op.ErrUnsupported, dev.Name(), err)
	}
	defer p.Release()
	if w := p.ThreadExecutionWidth(); w != 32 {
		return fmt.Errorf("metal: %w: %s has SIMD width %d, the kernels need 32", op.ErrUnsupported, dev.Name(), w)
	}
	return nil
}
