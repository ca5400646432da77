// Package gen registers every family's generator settings (family/NAME/gen: the config.json of
// a generated checkpoint, presets, published releases' tensor tables, format fixtures) with the
// module's checkpoint generator, internal/modelgen, which imports it. Adding a family's
// generator settings is one import line here.
package gen

import (
	_ "github.com/stratakernels/strata/family/qwen35/gen"    // Qwen3.5 / Qwen3.6
	_ "github.com/stratakernels/strata/family/qwen3next/gen" // Qwen3-Next
	_ "github.com/stratakernels/strata/family/qwen4exp/gen"  // Qwen3.8-Flash-Next
)
