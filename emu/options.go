package emu

import (
	"fmt"

	"github.com/stratakernels/strata/metal/mtl"
)

// optionFlags maps a library's compile options (MTLCompileOptions) onto the emulator's compiler.
// The language version defines __METAL_VERSION__ (310, 320 or 400) and gates Metal 4 tensor ops
// (a source that includes them needs 4.0, as on Apple's compiler). The math mode chooses the
// floating-point flags: safe keeps IEEE arithmetic (-fno-fast-math); relaxed allows
// reassociation, reciprocals and contraction but keeps NaN and infinities; fast is -ffast-math,
// under which clang folds isnan to false and may drop -inf sentinels, as Metal's fast mode
// allows. The math functions are libm's whatever PreciseFunctions says. Errors wrap
// mtl.ErrCompile.
func optionFlags(o mtl.CompileOptions) (flags []string, metalVersion int, err error) {
	if err := o.Check(); err != nil {
		return nil, 0, err
	}
	metalVersion = int(o.LanguageVersion>>16)*100 + int(o.LanguageVersion&0xffff)*10
	switch o.MathMode {
	case mtl.MathSafe:
		flags = []string{"-fno-fast-math"}
	case mtl.MathRelaxed:
		flags = []string{"-fno-fast-math", "-fassociative-math", "-freciprocal-math", "-fno-signed-zeros", "-fno-trapping-math", "-ffp-contract=fast"}
	case mtl.MathFast:
		flags = []string{"-ffast-math"}
	default:
		return nil, 0, fmt.Errorf("emu: math mode %v: %w", o.MathMode, mtl.ErrCompile)
	}
	return flags, metalVersion, nil
}
